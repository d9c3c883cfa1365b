"""HTTP/1.1 to one model server's REST port on kept-alive connections, from an event loop.

The hop from the Python service to the model server is the hottest path of the service: a
pass-through handler spends about half of its CPU on it. This client only speaks what a model
server answers (a status line, headers, a body by Content-Length, chunked or to the close,
keep-alive), with one deadline over the whole exchange. test/perf/bench_http_clients.py
measures it against aiohttp and httpx (docs/performance.md has the figures): it is kept while it
is at least 10 % faster than the better of them at 16 concurrent requests and at 1.

Connections belong to the event loop that opened them; a pool used from another loop (falcon's
test client runs one per thread) drops the idle ones it cannot use.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from dataclasses import dataclass

MAX_HEADER_LINE = 65536
MAX_HEADERS = 256
HEAD_LIMIT = MAX_HEADERS * 256  # bytes of status line and headers read before refusing
_END_OF_HEAD = b"\r\n\r\n"


class Unreachable(OSError):
    """No answer: refused, reset, closed before a whole answer, or not HTTP."""


class Refused(Unreachable):
    """No connection: nothing of the request was sent (another instance may take it)."""


class PastDeadline(TimeoutError):
    """The deadline passed before the whole answer arrived."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes


class _Connection:
    __slots__ = ("loop", "reader", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()
        self.used = False  # it carried a whole exchange: the server may close it meanwhile

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop already closed
            self.writer.transport.abort()


class ConnectionPool:
    """Kept-alive connections to (host, port); `exchange` sends one request, reads its answer."""

    def __init__(self, host: str, port: int, max_idle: int = 32) -> None:
        self.host, self.port, self.max_idle = host, port, max_idle
        self._idle: collections.deque[_Connection] = collections.deque()

    async def exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], deadline: float
    ) -> Answer:
        """One request and its whole answer by `deadline` (time.monotonic(), the loop's
        clock). A kept-alive connection the server had closed meanwhile is retried once on a
        new one; anything else is Unreachable or PastDeadline."""
        loop = asyncio.get_running_loop()
        if deadline <= loop.time():
            raise PastDeadline("the deadline had passed")
        head = request_head(method, path, self.host, self.port, body, headers)
        message = head + body if body else head
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    conn = self._take(loop) or await self._connect()
                    try:
                        answer, reusable = await _exchange(conn, message)
                    except Unreachable:
                        conn.close()
                        if conn.used:  # a stale kept-alive connection: once more, on a new one
                            continue
                        raise
                    except BaseException:
                        conn.close()
                        raise
                    conn.used = True
                    if reusable:
                        self._give_back(conn)
                    else:
                        conn.close()
                    return answer
        except TimeoutError as exc:
            raise PastDeadline("reading the answer") from exc

    def close(self) -> None:
        idle, self._idle = list(self._idle), collections.deque()
        for conn in idle:
            conn.close()

    def _take(self, loop: asyncio.AbstractEventLoop) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.loop is loop:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
        except OSError as exc:
            raise Refused(str(exc)) from exc
        return _Connection(reader, writer)

    def _give_back(self, conn: _Connection) -> None:
        if len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()


def request_head(
    method: str, path: str, host: str, port: int, body: bytes | None, headers: dict[str, str]
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _exchange(conn: _Connection, message: bytes) -> tuple[Answer, bool]:
    """Send, then read the answer; (answer, whether the connection can carry another)."""
    reader = conn.reader
    try:
        conn.writer.write(message)
        head = await reader.readuntil(_END_OF_HEAD)
        lines = head[:-4].split(b"\r\n")
        if len(lines) > MAX_HEADERS + 1 or any(len(line) > MAX_HEADER_LINE for line in lines):
            raise ValueError("too many or too long header lines")
        status, reason, version = parse_status_line(lines[0])
        headers = [parse_header_line(line) for line in lines[1:]]
        fields = {name.lower(): value for name, value in headers}
        if "chunked" in fields.get("transfer-encoding", "").lower():
            body, reusable = await _chunked(reader), True
        elif (length := content_length(fields)) is not None:
            body, reusable = await reader.readexactly(length), True
        else:  # no length: the body ends when the server closes
            body, reusable = await reader.read(), False
    except asyncio.IncompleteReadError as exc:
        where = "in the answer" if exc.partial else "without an answer"
        raise Unreachable(f"the model server closed the connection {where}") from exc
    except asyncio.LimitOverrunError as exc:
        raise Unreachable("the answer's head is too long") from exc
    except (ConnectionError, ValueError) as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from exc
    keeps_alive = version == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
    return Answer(status, reason, headers, body), reusable and keeps_alive


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


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";")[0].strip() or b"0", 16)  # chunk extensions ignored
        if size == 0:
            await _trailers(reader)
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk does not end in CRLF")


async def _trailers(reader: asyncio.StreamReader) -> None:
    for _ in range(MAX_HEADERS):
        if await reader.readuntil(b"\r\n") == b"\r\n":
            return
    raise ValueError("too many trailer lines")
