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
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import loopback
import nginx_front

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


def front_door(
    tmp_path: Path, env: dict[str, str], user_code: bool, model_server: bool = True
) -> contextlib.AbstractContextManager[int]:
    """nginx as serve configures it in front of Backend stand-ins; yields its port."""
    return nginx_front.front_door(
        tmp_path, env, user_code, Backend if model_server else None, Backend
    )


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


class SlowService(Backend):
    """A Python service whose every answer but /ping takes SLOW_SECONDS."""

    def _answer(self) -> None:
        if self.path.split("?")[0] != "/ping":
            time.sleep(SLOW_SECONDS)
        super()._answer()

    do_GET = do_POST = do_DELETE = _answer


SLOW_SECONDS = 3.0


def test_a_multi_model_invocation_has_the_invocation_timeout_and_a_load_the_loads(
    tmp_path: Path, monkeypatch
):
    """/models/<name>/invoke is an invocation: nginx's read timeout is the invocations' (as for
    /invocations), not the load timeout (SAGEMAKER_TFS_WAIT_TIME_SECONDS + 10) of /models."""
    monkeypatch.setattr(Backend, "big", 100)
    env = {
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "1",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "1",
    }
    with nginx_front.front_door(tmp_path, env, True, Backend, SlowService) as port:
        started = time.monotonic()
        status, body = ask(port, "POST", "/models/a%2Fb/invoke", TFS_REQUEST)
        assert time.monotonic() - started < SLOW_SECONDS
        assert (status, json.loads(body)["error"]) == (
            504,
            "Gateway Timeout: the invocation did not finish within 1 s",
        )
        load = b'{"model_name": "m", "url": "m"}'
        for method, path in (("POST", "/models"), ("DELETE", "/models/x%2Finvoke")):
            assert ask(port, method, path, load)[0] == 200, path  # slower than 1 s: no 504
