"""http11.ConnectionPool (asyncio) against a raw loopback socket server that answers canned
bytes: what it accepts, what it refuses, when it keeps a connection, and that every wait has a
deadline."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sagemaker_serving.tfs_client import http11
from sagemaker_serving.tfs_client.http11 import PastDeadline, Unreachable


class ConnectionPool:
    """http11.ConnectionPool driven from these synchronous tests, on an event loop of its own."""

    def __init__(self, host: str, port: int, max_idle: int = 32) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = http11.ConnectionPool(host, port, max_idle)

    def exchange(self, *args):
        return self.loop.run_until_complete(self.pool.exchange(*args))

    def close(self) -> None:
        self.pool.close()
        self.loop.run_until_complete(asyncio.sleep(0))  # the aborted transports' callbacks
        self.loop.close()


Script = Callable[[socket.socket], None]


class RawServer:
    """Accepts connections on loopback; each runs `script` after reading one request head."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(data) < length:
                    data += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + data[:length])
                data = data[length:]
                try:
                    self.script(conn)
                except OSError:
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], RawServer]]:
    servers: list[RawServer] = []

    def start(script: Script) -> RawServer:
        servers.append(RawServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def sends(*parts: bytes, pause: float = 0.0) -> Script:
    def script(conn: socket.socket) -> None:
        for part in parts:
            conn.sendall(part)
            time.sleep(pause)

    return script


def exchange(server: RawServer, seconds: float = 5.0, body: bytes | None = b"{}"):
    pool = ConnectionPool("127.0.0.1", server.port)
    try:
        return pool.exchange("POST", "/v1/x", body, {}, time.monotonic() + seconds), pool
    except BaseException:
        pool.close()
        raise


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_the_request_carries_host_length_and_body(serve):
    server = serve(sends(OK))
    pool = ConnectionPool("127.0.0.1", server.port)
    pool.exchange("POST", "/v1/m:predict", b"[1]", {"Content-Type": "a/b"}, time.monotonic() + 5)
    pool.close()
    head = server.requests[0]
    assert head.startswith(b"POST /v1/m:predict HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}".encode() in head
    assert b"Content-Type: a/b\r\n" in head and b"Content-Length: 3\r\n" in head
    assert head.endswith(b"\r\n\r\n[1]")


def test_a_get_sends_no_content_length(serve):
    server = serve(sends(OK))
    _, pool = exchange(server, body=None)
    pool.close()
    assert b"content-length" not in server.requests[0].lower()


def test_status_headers_and_body_by_length_and_the_connection_is_kept(serve):
    server = serve(sends(OK))
    answer, pool = exchange(server)
    again = pool.exchange("GET", "/", None, {}, time.monotonic() + 5)
    pool.close()
    assert (answer.status, answer.reason, answer.body) == (200, "OK", b"{}")
    assert ("Content-Type", "application/json") in answer.headers
    assert again.body == b"{}" and server.connections == 1


def test_a_chunked_body_with_extensions_and_trailers(serve):
    chunked = (
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    server = serve(sends(chunked))
    answer, pool = exchange(server)
    pool.exchange("GET", "/", None, {}, time.monotonic() + 5)
    pool.close()
    assert (answer.status, answer.body) == (404, b"abcde") and server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    ],
)
def test_an_http_1_0_or_connection_close_answer_is_not_reused(serve, answer):
    server = serve(sends(answer))
    _, pool = exchange(server)
    pool.exchange("GET", "/", None, {}, time.monotonic() + 5)
    pool.close()
    assert server.connections == 2


def test_a_body_without_length_ends_when_the_server_closes(serve):
    def script(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")
        conn.shutdown(socket.SHUT_WR)
        raise OSError("closed")

    answer, pool = exchange(serve(script))
    pool.close()
    assert answer.body == b"until the end"


@pytest.mark.parametrize(
    "garbage",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n",
    ],
)
def test_what_is_not_an_http_answer_is_unreachable(serve, garbage):
    with pytest.raises(Unreachable):
        exchange(serve(sends(garbage)))


def test_a_connection_closed_in_the_body_is_unreachable(serve):
    def script(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        raise OSError("closed")

    with pytest.raises(Unreachable):
        exchange(serve(script))


def test_a_refused_connection_is_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port)
    with pytest.raises(Unreachable):
        pool.exchange("GET", "/", None, {}, time.monotonic() + 5)
    pool.close()


def test_a_trickling_answer_stops_at_the_deadline(serve):
    """One chunk every 0.2 s forever: each read has a timeout, the whole answer the deadline."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = serve(sends(head, *([b"1\r\nx\r\n"] * 100), pause=0.2))
    started = time.monotonic()
    with pytest.raises(PastDeadline):
        exchange(server, seconds=1.0)
    assert time.monotonic() - started < 5


def test_a_deadline_already_past_does_not_send(serve):
    server = serve(sends(OK))
    pool = ConnectionPool("127.0.0.1", server.port)
    with pytest.raises(PastDeadline):
        pool.exchange("GET", "/", None, {}, time.monotonic() - 1)
    pool.close()
    assert server.requests == []


def test_the_pool_keeps_at_most_max_idle(serve):
    server = serve(sends(OK))
    pool = http11.ConnectionPool("127.0.0.1", server.port, max_idle=2)

    async def five_at_once() -> None:
        deadline = time.monotonic() + 5
        await asyncio.gather(*(pool.exchange("GET", "/", None, {}, deadline) for _ in range(5)))
        assert len(pool._idle) == 2 and server.connections == 5
        pool.close()
        assert len(pool._idle) == 0

    asyncio.run(five_at_once())


def test_idle_connections_of_another_event_loop_are_not_used(serve):
    server = serve(sends(OK))
    pool = http11.ConnectionPool("127.0.0.1", server.port)
    for _ in range(2):  # falcon's test client, for one, may run a new loop
        answer = asyncio.run(pool.exchange("GET", "/", None, {}, time.monotonic() + 5))
        assert answer.body == b"{}"
    assert server.connections == 2
    pool.close()
