"""HTTP/1.1 on kept-alive loopback connections to one model server's REST port.

The hop from the Python service to the model server is the hottest path of the service: a
pass-through handler spends about half of its CPU on it. urllib3 (with http.client's email
header parser) and requests' request preparation cost 0.55 ms of CPU per call here; this
client, which only speaks what a model server answers (a status line, headers, a body by
Content-Length or chunked, keep-alive), costs 0.05 ms. Bodies are read in one piece (linear
time), every wait has the caller's deadline, and connections are pooled per instance
(thread-safe, LIFO, at most `max_idle` kept).
"""

from __future__ import annotations

import collections
import io
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_HEADER_LINE = 65536
MAX_HEADERS = 256


class Unreachable(OSError):
    """No answer: refused, reset, closed before a whole answer, or not HTTP."""


class PastDeadline(TimeoutError):
    """The deadline passed before the whole answer arrived."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes


class _Connection:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader: io.BufferedReader = self.sock.makefile("rb", buffering=65536)  # type: ignore[assignment]
        self.used = False

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


class ConnectionPool:
    """Kept-alive connections to (host, port); `exchange` sends one request, reads its answer."""

    def __init__(self, host: str, port: int, max_idle: int = 32) -> None:
        self.host, self.port, self.max_idle = host, port, max_idle
        self._idle: collections.deque[_Connection] = collections.deque()
        self._lock = threading.Lock()

    def exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], deadline: float
    ) -> Answer:
        """One request and its whole answer. A kept-alive connection the server had closed
        meanwhile is retried once on a new one; anything else is Unreachable or PastDeadline."""
        head = request_head(method, path, self.host, self.port, body, headers)
        while True:
            with Attempt(self._take(deadline), self._give_back) as attempt:
                attempt.done(*_exchange(attempt.conn, head, body, deadline))
            if attempt.answer is not None:
                return attempt.answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle), collections.deque()
        for conn in idle:
            conn.close()

    def _take(self, deadline: float) -> _Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            return _Connection(self.host, self.port, _remaining(deadline))
        except TimeoutError as exc:
            raise PastDeadline("connecting") from exc
        except OSError as exc:
            raise Unreachable(str(exc)) from exc

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise PastDeadline("the deadline had passed")
    return left


def request_head(
    method: str, path: str, host: str, port: int, body: bytes | None, headers: dict[str, str]
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _exchange(
    conn: _Connection, head: bytes, body: bytes | None, deadline: float
) -> tuple[Answer, bool]:
    """Send, then read the answer; (answer, whether the connection can carry another)."""
    try:
        conn.sock.settimeout(_remaining(deadline))
        if body is not None and len(body) <= 16384:
            conn.sock.sendall(head + body)
        else:
            conn.sock.sendall(head)
            if body:
                conn.sock.sendall(body)
        status, reason, version = _status_line(conn.reader)
        headers = _headers(conn.reader)
        fields = {name.lower(): value for name, value in headers}
        answer_body, reusable = _body(conn, fields, deadline)
    except TimeoutError as exc:
        raise PastDeadline("reading the answer") from exc
    except (ConnectionError, ValueError) as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from exc
    keep = reusable and keeps_alive(version, fields)
    return Answer(status, reason, headers, answer_body), keep


def _status_line(reader: io.BufferedReader) -> tuple[int, str, str]:
    line = reader.readline(MAX_HEADER_LINE)
    if not line:
        raise ConnectionError("the model server closed the connection without an answer")
    return parse_status_line(line)


def _headers(reader: io.BufferedReader) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    for _ in range(MAX_HEADERS):
        line = reader.readline(MAX_HEADER_LINE)
        if line in (b"\r\n", b"\n"):
            return headers
        if not line:
            raise ConnectionError("the model server closed the connection in the headers")
        headers.append(parse_header_line(line))
    raise ValueError("too many header lines")


# ----- shared with async_http11 --------------------------------------------------------------


class Attempt:
    """One exchange on `conn`, as a with-block that reports it with `done(answer, reusable)`.
    After a whole answer the connection goes back to its pool (`give_back`) when it can carry
    another request, else it is closed. An Unreachable exchange closes it and, when it was a
    kept-alive one (which the server may have closed meanwhile), is swallowed so that the caller
    retries on a new connection (`answer` stays None); any other error closes it and goes on."""

    __slots__ = ("answer", "conn", "give_back", "reusable")

    def __init__(self, conn: Any, give_back: Callable[[Any], None]) -> None:
        self.conn, self.give_back = conn, give_back
        self.answer: Answer | None = None
        self.reusable = False

    def done(self, answer: Answer, reusable: bool) -> None:
        self.answer, self.reusable = answer, reusable

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        if exc_type is not None:
            self.conn.close()
            return issubclass(exc_type, Unreachable) and self.conn.used
        self.conn.used = True
        if self.reusable:
            self.give_back(self.conn)
        else:
            self.conn.close()
        return False


def parse_status_line(line: bytes) -> tuple[int, str, str]:
    """(status, reason, version) of an answer's first line; ValueError if it is not HTTP."""
    version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/") or not code.isdigit():
        raise ValueError(f"not an HTTP answer: {line[:80]!r}")
    return int(code), reason, version


def parse_header_line(line: bytes) -> tuple[str, str]:
    name, sep, value = line.decode("latin-1").partition(":")
    if not sep:
        raise ValueError(f"not a header line: {line[:80]!r}")
    return name.strip(), value.strip()


def content_length(fields: dict[str, str]) -> int | None:
    """The body's length from lower-cased header fields; None when none is given."""
    length = fields.get("content-length")
    if length is None:
        return None
    if not length.isdigit():
        raise ValueError(f"bad Content-Length {length!r}")
    return int(length)


def is_chunked(fields: dict[str, str]) -> bool:
    return "chunked" in fields.get("transfer-encoding", "").lower()


def chunk_size(line: bytes) -> int:
    """A chunk's size from its size line (extensions ignored); ValueError if not hex."""
    return int(line.split(b";")[0].strip() or b"0", 16)


def keeps_alive(version: str, fields: dict[str, str]) -> bool:
    """Whether an answer leaves its connection open for another request."""
    return version == "HTTP/1.1" and fields.get("connection", "").lower() != "close"


def _body(conn: _Connection, fields: dict[str, str], deadline: float) -> tuple[bytes, bool]:
    reader = conn.reader
    if is_chunked(fields):
        return _chunked(conn, deadline), True
    length = content_length(fields)
    if length is not None:
        data = reader.read(length)
        if len(data) != length:
            raise ConnectionError("the model server closed the connection in the body")
        return data, True
    parts = []  # no length: the body ends when the server closes
    while chunk := reader.read1(1 << 20):
        parts.append(chunk)
        conn.sock.settimeout(_remaining(deadline))
    return b"".join(parts), False


def _chunked(conn: _Connection, deadline: float) -> bytes:
    reader, parts = conn.reader, list[bytes]()
    while True:
        size_line = reader.readline(MAX_HEADER_LINE)
        if not size_line:
            raise ConnectionError("the model server closed the connection in a chunk")
        size = chunk_size(size_line)
        if size == 0:
            _headers(reader)  # trailers, then the blank line
            return b"".join(parts)
        data = reader.read(size)
        if len(data) != size or reader.read(2) != b"\r\n":
            raise ConnectionError("the model server closed the connection in a chunk")
        parts.append(data)
        conn.sock.settimeout(_remaining(deadline))
