"""Answers no model server here gives (null, irregular columns, exotic escapes and numbers,
non-answers) converted alike by the njs fast path and the Python service: the ANSWER_CASES of
test/support/answer_cases.py, fed to nginx/tfs.js from a stand-in model server and to the service's
built-in output conversion."""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from answer_cases import ANSWER_CASES, AnswerCase
from conftest import free_port_range
from loopback import serving
from sagemaker_serving.formats.builtin import BuiltinFormats
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.launcher.nginx_config import find_nginx
from sagemaker_serving.launcher.njs_tables import write_njs_tables

ACCEPTS = {"application/json": "json", "application/jsonlines": "json_lines", "text/csv": "csv"}
ANSWERS = {case.name: case.answer for case in ANSWER_CASES}
NOT_AN_ANSWER = "The model server answered with a body that is not a TF Serving answer"

NGINX_CONF = """
load_module {njs};
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{}}
http {{
    js_path "{nginx_dir}";
    js_path "{tmp}";
    js_import tfs from tfs.js;
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_body_buffer_size 1m;
    subrequest_output_buffer_size 4m;
    server {{
        listen 127.0.0.1:{port};
        set $tfs_default_model "default";
        set $req_id "answer-test";
        location = /invocations {{ js_content tfs.invocations; }}
        location /_tfs/ {{
            internal;
            proxy_pass http://127.0.0.1:{model_port}/;
        }}
    }}
}}
"""


class StandIn(http.server.BaseHTTPRequestHandler):
    """POST /v1/models/<case>:predict answers the case's text."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name = self.path.split("/v1/models/", 1)[-1].split(":", 1)[0]
        body = ANSWERS[name]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def njs_url(tmp_path_factory) -> Iterator[str]:
    """nginx with tfs.js in front of the stand-in model server."""
    layout = find_nginx()
    tmp = tmp_path_factory.mktemp("answer_njs")
    port, model_port = free_port_range(2)
    conf = tmp / "nginx.conf"
    write_njs_tables(tmp)  # tfs.js's tables, as serve writes them beside its nginx.conf
    conf.write_text(
        NGINX_CONF.format(
            njs=layout.njs_module,
            tmp=tmp,
            nginx_dir=layout.nginx_dir,
            port=port,
            model_port=model_port,
        )
    )
    url = f"http://127.0.0.1:{port}"
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", model_port), StandIn)):
        proc = subprocess.Popen([layout.binary, "-c", str(conf), "-p", str(tmp)])
        try:
            _wait_listening(url, proc, tmp)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def _wait_listening(url: str, proc: subprocess.Popen, tmp: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(requests.ConnectionError):
            requests.get(url, timeout=1)
            return
        time.sleep(0.1)
    raise RuntimeError(f"nginx did not start:\n{(tmp / 'error.log').read_text()}")


def expected(case: AnswerCase, accept: str) -> bytes | None:
    return getattr(case, ACCEPTS[accept])


def check(status: int, content_type: str, body: bytes, want: bytes | None, accept: str) -> None:
    if want is None:
        assert (status, content_type) == (502, "application/json"), body
        assert NOT_AN_ANSWER.encode() in body
        return
    assert (status, content_type, body) == (200, accept, want)


CASES = [(case, accept) for case in ANSWER_CASES for accept in ACCEPTS]
IDS = [f"{case.name}-{accept.split('/')[1]}" for case, accept in CASES]


@pytest.mark.parametrize(("case", "accept"), CASES, ids=IDS)
def test_njs_converts_the_answer(njs_url, case, accept):
    reply = requests.post(
        f"{njs_url}/invocations",
        data=b"1.0",
        headers={
            "Content-Type": "application/json",
            "Accept": accept,
            "X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={case.name}",
        },
        timeout=10,
    )
    check(
        reply.status_code,
        reply.headers["Content-Type"],
        reply.content,
        expected(case, accept),
        accept,
    )


@pytest.mark.parametrize(("case", "accept"), CASES, ids=IDS)
def test_the_service_converts_the_answer(case, accept):
    response = SimpleNamespace(status_code=200, content=case.answer)
    try:
        body, content_type = BuiltinFormats(None).answer(
            response, SimpleNamespace(accept_header=accept)
        )
        status = 200
    except PayloadError as err:
        status, content_type, body = err.status, "application/json", err.message.encode()
    check(status, content_type, body, expected(case, accept), accept)
