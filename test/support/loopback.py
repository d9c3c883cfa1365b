"""Talking to servers on loopback, for tests and scripts: one HTTP exchange, a socketserver
served on a thread, and requests sent one after another on a thread while something else runs."""

from __future__ import annotations

import contextlib
import http.client
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Self


def ask(
    port: int, method: str, path: str, body: bytes = b"", *, timeout: float
) -> tuple[int, bytes]:
    """(status, body) of one JSON request to 127.0.0.1:`port`, on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


@contextlib.contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[None]:
    """`server` answers on a thread of its own until the block ends; then it is shut and closed."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


class RequestLoop:
    """Requests to 127.0.0.1:`port` one after another on a keep-alive connection, on a thread of
    its own, `every` seconds apart, while the with-block runs. A request that fails is answered
    as the text "<error type>: <error>", and the next goes on a new connection. Subclasses say
    what to send (`next_request`) and what to make of each answer (`answered`)."""

    def __init__(self, port: int, every: float, timeout: float) -> None:
        self.port = port
        self.every = every
        self.timeout = timeout
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(self.timeout)

    def next_request(self) -> tuple[str, str, bytes | None]:
        """(method, path, body) of the next request."""
        raise NotImplementedError

    def answered(self, answer: tuple[int, bytes] | str, seconds: float) -> None:
        """(status, body) or the error's text, and the seconds it took."""
        raise NotImplementedError

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)

    def _run(self) -> None:
        conn = self._connect()
        while not self.stop.is_set():
            started = time.perf_counter()
            answer: tuple[int, bytes] | str
            try:
                conn.request(*self.next_request())
                reply = conn.getresponse()
                answer = reply.status, reply.read()
            except (OSError, http.client.HTTPException) as err:
                answer = f"{type(err).__name__}: {err}"
                conn.close()
                conn = self._connect()
            self.answered(answer, time.perf_counter() - started)
            self.stop.wait(self.every)
        conn.close()
