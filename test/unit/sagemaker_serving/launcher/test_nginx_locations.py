"""No location of serve's nginx.conf has a size past which it hangs: the real nginx, with the
config serve writes, in front of stand-in backends (a model server on a loopback port and a
Python service on its unix socket) whose every answer is larger than nginx's proxy buffers
(64k + 16 x 64k = 1,114,112 bytes). Each route answers within a deadline: /ping, a TF Serving
request passed straight to the model server (/_tfs/), the Python service's routes
(/invocations, /models, /metrics); and a model server that does not answer is nginx's JSON
error, never its HTML page."""

from __future__ import annotations

import contextlib
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
from sagemaker_serving.config.access import SOCKET_UMASK, socket_dir
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import find_nginx, nginx_conf
from sagemaker_serving.launcher.request_counts import log_format
from sagemaker_serving.serve import new_ready_file

BIG = 2 * 1024 * 1024  # past proxy_buffer_size + proxy_buffers
DEADLINE = 20.0  # seconds for any answer


class Backend(BaseHTTPRequestHandler):
    """Answers every request with a JSON body of `big` bytes (the Python service's /ping too,
    unless `small`: then an empty 200)."""

    protocol_version = "HTTP/1.1"
    big = BIG
    small = True

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        path = self.path.split("?")[0]
        if self.small and path == "/ping":
            status, body = 200, b""
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
    handles_invocations: bool


def _as_gunicorn_leaves_it(path: Path) -> None:
    """The stand-in's socket as the service's is (gunicorn's umask): serve's user's only."""
    os.chmod(path, 0o777 & ~SOCKET_UMASK)


@contextlib.contextmanager
def front_door(
    tmp_path: Path, env: dict[str, str], user_code: bool, model_server: bool = True
) -> Iterator[int]:
    """nginx as serve configures it, its backends the stand-ins (`model_server`: one runs);
    yields its port."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env(env)
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
        default_model="" if multi_model else "m",
        rest_ports=[tfs.server_address[1]],
        service=ServiceLink(str(socket_path), user_code),
        ready_file=ready_file,
        shutdown_grace=1,
        counts_path="/dev/null",
        counts_format=log_format(),
    )
    conf.write()
    if not model_server:
        tfs.server_close()  # its port refuses
    with contextlib.ExitStack() as backends:
        if model_server:
            backends.enter_context(serving(tfs))
        backends.enter_context(serving(service))
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


TFS_REQUEST = b'{"instances": [1.0]}'  # passed straight to the model server


@pytest.mark.parametrize(
    ("env", "user_code"),
    [({}, False), ({}, True), ({"SAGEMAKER_MULTI_MODEL": "true"}, True)],
    ids=["built-in", "user-code", "multi-model"],
)
def test_every_route_answers_past_the_proxy_buffers(tmp_path: Path, env: dict, user_code: bool):
    with front_door(tmp_path, env, user_code) as port:
        assert ask(port, "GET", "/ping") == (200, b"")
        paths = ["/invocations", "/models", "/models/x/invoke", "/metrics"]
        for path in paths if env else paths[:1] + paths[-1:]:
            for body in (TFS_REQUEST, b"[1.0]"):  # straight on (built-in), else the service
                status, answer = ask(port, "POST" if "invo" in path else "GET", path, body)
                assert status == 200 and len(answer) > BIG / 2, (path, answer[:200])


def test_a_big_ping_answer_ends_without_hanging(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(Backend, "small", False)
    with front_door(tmp_path, {}, user_code=True) as port:
        status, body = ask(port, "GET", "/ping")
    assert status == 200 and len(body) > BIG / 2


def test_a_model_server_that_does_not_answer_is_a_json_503(tmp_path: Path):
    """A TF Serving request passed straight on, its model server down: nginx's own error
    page, as JSON, naming no address."""
    with front_door(tmp_path, {}, user_code=False, model_server=False) as port:
        status, body = ask(port, "POST", "/invocations", TFS_REQUEST)
    assert status == 503, body
    assert json.loads(body)["error"] == "The model server is unavailable"
