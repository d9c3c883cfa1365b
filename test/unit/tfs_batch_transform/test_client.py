"""tfs_batch_transform.client: /invocations' retries (urllib3's Retry on the session) against a
real HTTP server on loopback that answers each body as scripted."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from urllib3.exceptions import MaxRetryError, ProtocolError

from tfs_batch_transform.client import CHUNK, Endpoint, InvocationError, retry_policy

DROP = 0  # in a script: close the connection without an answer


class _Server(http.server.ThreadingHTTPServer):
    """`script`: for a body, the statuses of its first attempts (then 200); `seen`: every body
    received, in order."""

    daemon_threads = True
    script: dict[bytes, list[int]]
    seen: list[bytes]


class _Scripted(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the container's nginx
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding") != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0], 16):
            body += self.rfile.read(size)
            self.rfile.readline()  # the chunk's CRLF
        self.rfile.readline()  # the last chunk's CRLF (no trailers)
        return body

    def do_POST(self) -> None:
        body = self._body()
        self.server.seen.append(body)
        statuses = self.server.script.get(body, [])
        status = statuses.pop(0) if statuses else 200
        if status == DROP:
            self.close_connection = True
            return
        answer = b"done:" + body[:20] if status == 200 else b'{"error": "not now"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Scripted)
    srv.script, srv.seen = {}, []
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def endpoint(server: _Server, max_retries: int) -> Endpoint:
    return Endpoint(f"http://127.0.0.1:{server.server_address[1]}", max_retries)


def test_a_503_then_a_200_is_retried_and_a_400_is_not(server):
    server.script = {b"busy": [503], b"bad": [400]}
    ep = endpoint(server, max_retries=3)
    reply = ep.invoke(b"busy", {"Content-Type": "text/csv"}, timeout=10)
    assert (reply.body, reply.attempts) == (b"done:busy", 2)
    with pytest.raises(InvocationError) as info:
        ep.invoke(b"bad", {}, timeout=10)
    assert (info.value.status, info.value.attempts) == (400, 1)
    assert str(info.value) == 'HTTP 400: {"error": "not now"}'
    assert server.seen == [b"busy", b"busy", b"bad"]


def test_the_last_answer_is_reported_once_the_retries_ran_out(server):
    server.script = {b"busy": [503, 429, 503]}
    with pytest.raises(InvocationError) as info:
        endpoint(server, max_retries=1).invoke(b"busy", {}, timeout=10)
    assert (info.value.status, info.value.attempts) == (429, 2)
    assert str(info.value) == 'HTTP 429: {"error": "not now"} (after 2 attempts)'
    assert server.seen == [b"busy", b"busy"]


def test_a_dropped_connection_is_retried(server):
    server.script = {b"once": [DROP], b"always": [DROP, DROP]}
    ep = endpoint(server, max_retries=1)
    assert ep.invoke(b"once", {}, timeout=10).attempts == 2
    with pytest.raises(InvocationError) as info:
        ep.invoke(b"always", {}, timeout=10)
    assert (info.value.status, info.value.attempts) == (None, 2)
    assert str(info.value).endswith("(after 2 attempts)")
    assert "RemoteDisconnected" in str(info.value)


def test_a_chunked_body_is_sent_whole_again_on_a_retry(server):
    body = bytes(range(256)) * (CHUNK // 256) + b"tail"  # two chunks
    server.script = {body: [502]}
    reply = endpoint(server, max_retries=1).invoke(body, {}, timeout=10, chunked=True)
    assert reply.attempts == 2
    assert server.seen == [body, body]


def test_the_backoff_doubles_with_jitter_and_the_retries_are_counted():
    policy = retry_policy(3)
    waits = []
    for _ in range(3):
        policy = policy.increment("POST", "/invocations", error=ProtocolError("dropped"))
        waits.append(policy.get_backoff_time())
    assert waits[0] == 0  # urllib3: the first retry at once
    assert 1.0 <= waits[1] <= 1.5 and 2.0 <= waits[2] <= 2.5
    with pytest.raises(MaxRetryError):
        policy.increment("POST", "/invocations", error=ProtocolError("dropped"))
