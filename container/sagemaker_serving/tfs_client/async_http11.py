"""HTTP/1.1 to one model server's REST port on kept-alive connections, from an event loop.

The asyncio twin of http11.ConnectionPool, for the service's event-loop workers: the same
answers (status line, headers, a body by Content-Length, chunked or to the close), the same
errors (Unreachable, PastDeadline) and the same stale keep-alive retry, with one deadline over
the whole exchange. Connections belong to the event loop that opened them; a pool used from
another loop (falcon's test client runs one per thread) drops the idle ones it cannot use.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

from sagemaker_serving.tfs_client.http11 import (
    MAX_HEADER_LINE,
    MAX_HEADERS,
    Answer,
    Attempt,
    PastDeadline,
    Unreachable,
    chunk_size,
    content_length,
    is_chunked,
    keeps_alive,
    parse_header_line,
    parse_status_line,
    request_head,
)

HEAD_LIMIT = MAX_HEADERS * 256  # bytes of status line and headers read before refusing
_END_OF_HEAD = b"\r\n\r\n"


class _Connection:
    __slots__ = ("loop", "reader", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()
        self.used = False

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop already closed
            self.writer.transport.abort()


class AsyncConnectionPool:
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
                    with Attempt(conn, self._give_back) as attempt:
                        attempt.done(*await _exchange(conn, message))
                    if attempt.answer is not None:
                        return attempt.answer
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
            raise Unreachable(str(exc)) from exc
        return _Connection(reader, writer)

    def _give_back(self, conn: _Connection) -> None:
        if len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()


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
        if is_chunked(fields):
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
    return Answer(status, reason, headers, body), reusable and keeps_alive(version, fields)


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = chunk_size(await reader.readuntil(b"\r\n"))
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
