"""No location of serve's nginx.conf has a size past which it hangs: the real nginx, with the
config serve writes, in front of stand-in backends (a model server on a loopback port and a
Python service on its unix socket) whose every answer is larger than nginx's proxy buffers
(64k + 16 x 64k = 1,114,112 bytes). Each route answers within a deadline: /ping (its
per-instance and service probes), the fast path (/_tfs/), the Python service's routes
(user-code /invocations, /models, /metrics). And /ping never reads a page whose size grows
(the metrics): a multi-model /ping stopped answering for good once the model server's
metrics page outgrew the buffers."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import socketserver
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import loopback
from loopback import serving
from process_utils import free_port, terminate
from sagemaker_serving.config.access import SOCKET_UMASK, new_token, socket_dir
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import find_nginx, nginx_conf
from sagemaker_serving.serve import new_ready_file

BIG = 2 * 1024 * 1024  # past proxy_buffer_size + proxy_buffers
DEADLINE = 20.0  # seconds for any answer


class Backend(BaseHTTPRequestHandler):
    """Answers every request with a JSON body of `big` bytes, except, when `small`, the
    status of a model (as a model server: AVAILABLE for `m`, else a JSON 404) and the
    Python service's /ping (200)."""

    protocol_version = "HTTP/1.1"
    big = BIG
    small = True
    page = 0  # set: a predict is answered with an HTML page of this status, as nginx's own

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        path = self.path.split("?")[0]
        if self.small and path == "/v1/models/m":
            status, body = 200, AVAILABLE
        elif self.small and path.startswith("/v1/models/") and ":" not in path:
            status, body = 404, b'{ "error": "Could not find any versions of model x" }'
        elif self.small and path == "/ping":
            status, body = 200, b""
        elif self.page and path.endswith(":predict"):
            status, body = self.page, b"<html><body><h1>nginx says no</h1></body></html>"
        else:
            items = ",".join(["1.0"] * ((self.big - 20) // 4))
            status, body = 200, ('{"predictions": [' + items + "]}").encode()
        self.send_response(status)
        self.send_header(
            "Content-Type", "text/html" if body.startswith(b"<html") else "application/json"
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # BaseHTTPRequestHandler wants a client address
        request, _ = super().get_request()
        return request, ("local", 0)


@dataclass(frozen=True)
class ServiceLink:
    socket_path: str
    token: str
    handles_invocations: bool


def _as_gunicorn_leaves_it(path: Path) -> None:
    """The stand-in's socket as the service's is (gunicorn's umask): serve's user's only."""
    os.chmod(path, 0o777 & ~SOCKET_UMASK)


@contextlib.contextmanager
def front_door(
    tmp_path: Path, env: dict[str, str], user_code: bool, model: str = "m"
) -> Iterator[int]:
    """nginx as serve configures it, its backends the stand-ins; yields its port."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env(env)
    token = new_token()
    sockets = socket_dir()
    socket_path = sockets / "gunicorn.sock"
    tfs = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    service = UnixHTTPServer(str(socket_path), Backend)
    _as_gunicorn_leaves_it(socket_path)
    ready_file = new_ready_file()
    ready_file.touch()
    port = free_port()
    multi_model = settings.multi_model
    conf = nginx_conf(
        settings,
        find_nginx(),
        tmp_path,
        listen=f"127.0.0.1:{port}",
        default_model="" if multi_model else model,
        rest_ports=[tfs.server_address[1]],
        model_names=[] if multi_model else [model],
        service=ServiceLink(str(socket_path), token, user_code),
        ready_file=ready_file,
        shutdown_grace=1,
    )
    conf.write()
    with serving(tfs), serving(service):
        log = (tmp_path / "nginx.log").open("wb")
        nginx = subprocess.Popen(conf.command(), stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + DEADLINE
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                assert time.monotonic() < deadline and nginx.poll() is None, "nginx did not start"
                time.sleep(0.05)
            yield port
        finally:
            terminate(nginx, 10)
            log.close()
            shutil.rmtree(sockets, ignore_errors=True)
            shutil.rmtree(ready_file.parent, ignore_errors=True)


def ask(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """The answer, which must come within DEADLINE (a hang fails the test)."""
    return loopback.ask(port, method, path, body, timeout=DEADLINE)


AVAILABLE = b'{"model_version_status": [{"version": "1", "state": "AVAILABLE"}]}'


def test_multi_model_ping_does_not_read_the_growing_metrics_page(tmp_path: Path):
    """The model server's metrics page is BIG here, like every answer but a model's status."""
    with front_door(tmp_path, {"SAGEMAKER_MULTI_MODEL": "true"}, user_code=True) as port:
        status, body = ask(port, "GET", "/ping")
        assert (status, body) == (200, b"")
        for method, path in (("GET", "/models"), ("GET", "/metrics"), ("POST", "/models/x/invoke")):
            status, body = ask(port, method, path)
            assert (status, len(body)) == (200, len(body)) and len(body) > BIG - 100


@pytest.mark.parametrize(("env", "user_code"), [({}, False), ({}, True)])
def test_every_route_answers_past_the_proxy_buffers(tmp_path: Path, env: dict, user_code: bool):
    with front_door(tmp_path, env, user_code) as port:
        assert ask(port, "GET", "/ping") == (200, b"")
        status, body = ask(port, "POST", "/invocations", b"[1.0]")
        assert status == 200 and len(body) > BIG / 2, body[:200]
        assert ask(port, "GET", "/metrics")[0] == 200


def test_probes_answered_past_their_bound_end_without_hanging(tmp_path: Path, monkeypatch):
    """A probe's answer is a few hundred bytes; one past its bound (1 MiB) ends /ping at
    once (nginx closes the connection: "too big subrequest response"), never a hang."""
    monkeypatch.setattr(Backend, "small", False)  # every probe answer is BIG too
    for env in ({"SAGEMAKER_MULTI_MODEL": "true"}, {}):
        with front_door(tmp_path / str(len(env)), env, user_code=True) as port:
            started = time.monotonic()
            with contextlib.suppress(http.client.RemoteDisconnected):
                status, body = ask(port, "GET", "/ping")
                assert status == 503 and json.loads(body)["error"].startswith("Not ready")
            assert time.monotonic() - started < DEADLINE


def test_a_ping_that_fails_names_the_model_not_an_internal_address(tmp_path: Path):
    with front_door(tmp_path, {}, user_code=False, model="gone") as port:
        status, body = ask(port, "GET", "/ping")
    assert status == 503
    assert json.loads(body)["error"] == "Not ready: model gone is not available (404)"


@pytest.mark.parametrize(
    ("page", "status", "error"),
    [
        (413, 502, "The request to the model server failed (HTTP 413)"),
        (404, 502, "The request to the model server failed (HTTP 404)"),
        (502, 503, "The model server is unavailable (HTTP 502)"),
    ],
)
def test_an_html_page_on_the_fast_paths_hop_is_json(tmp_path, monkeypatch, page, status, error):
    """An HTML page about the fast path's own request to the model server (nginx's 413 was
    one) reaches the client as a JSON error, never inside one."""
    monkeypatch.setattr(Backend, "page", page)
    with front_door(tmp_path, {}, user_code=False) as port:
        got, body = ask(port, "POST", "/invocations", b"[1.0]")
    assert got == status, body
    assert b"<html" not in body and json.loads(body)["error"] == error
