"""The service's side of a handler pool: requests from a gunicorn worker's event loop.

Each worker keeps up to `size` connections to the pool's socket (a request holds one, so at
most `size` requests of the worker run in the pool at once). A request crosses once: its body
and context go to the pool, which runs the whole chain (input_handler, the model server,
output_handler) and answers within the request's deadline (504 past it: the connection is
dropped, the handlers run on in their process). While it runs, a handler may ask for the
built-in formats (default_input_handler, default_output_handler): `Callbacks` answers those.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagemaker_serving.environments import protocol
from sagemaker_serving.environments.messages import context_fields
from sagemaker_serving.environments.pool import SOCKET_NAME, member, stopped, wait_ready
from sagemaker_serving.errors import StatusError
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import Handlers

log = logging.getLogger(__name__)

PING_SECONDS = 1.0
_call_ids = itertools.count(1)  # unique in this process: a stray answer never matches

# (fn, header, body, context) -> (reply header, reply body)
Callbacks = Callable[[str, dict, bytes, Context], Awaitable[tuple[dict, bytes]]]


class HandlerProcessError(StatusError):
    """The pool did not answer a call (not running, crashed in the call, or too slow)."""


PEER = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


@dataclass
class HandlerPool:
    """Connections from this worker to one pool of handler processes."""

    socket_path: str
    functions: tuple[str, ...]
    size: int = 8
    _idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    unreachable: bool = False
    taken_over: bool = False  # its socket answered by a process that is not one of the pool's

    async def run(
        self, body: bytes, context: Context, callbacks: Callbacks
    ) -> tuple[dict[str, Any], bytes | bytearray | AsyncIterator[bytes]]:
        """The request's whole chain in the pool (host.py's run_request), in one exchange: the
        reply header (`content_type` and `model_status` of the handlers' answer, or `response`:
        the model server's, for the built-in formats; `took`: each step's seconds) and body
        (a streamed answer's: its chunks as they come, `_chunks`).
        Its HandlerError as StatusError with the handler's status."""
        call_id = next(_call_ids)
        header: dict[str, Any] = {"op": "run", "id": call_id, "context": context_fields(context)}
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
            self._loop = asyncio.get_running_loop()
        streamed: AsyncIterator[bytes] | None = None
        try:  # the wait for a free connection is within the request's deadline too
            async with asyncio.timeout(max(0.001, context.deadline - time.monotonic())):
                async with self._slots:
                    reader, writer = await self._connection()
                    try:
                        reply, data = await self._exchange(
                            reader, writer, header, body, context, callbacks
                        )
                    except BaseException:
                        writer.close()
                        raise
                    if reply.get("stream"):  # the chunks hold the connection (not a slot:
                        streamed = self._chunks(reader, writer, call_id)  # see _chunks)
                    else:
                        self._idle.append((reader, writer))
        except TimeoutError:
            raise HandlerProcessError(
                "The handlers did not finish within the request's time limit", 504
            ) from None
        except protocol.ForeignFrame as exc:  # the connection was dropped (writer.close)
            log.error("a handler process's answer was not its own: %s", exc)
            raise HandlerProcessError(
                "The handler process answered with a frame of another call "
                "(its connection was dropped: see the log)",
                500,
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError, protocol.ProtocolError) as exc:
            if stopped(Path(self.socket_path).parent):
                log.warning("the handler processes were stopped while running the handlers")
                raise HandlerProcessError(
                    "The handler processes were stopped before the handlers finished (the "
                    "model was unloaded, or the endpoint is stopping)",
                    503,
                ) from None
            self.unreachable = True  # a crash, or the whole pool gone: code.py looks
            log.error("the handler process ended while running the handlers: %r", exc)
            raise HandlerProcessError(
                "The handler process ended while running the handlers (it may have crashed: "
                "see the log)",
                500,
            ) from None
        if not reply.get("ok"):
            raise StatusError(str(reply.get("message")), int(reply.get("status", 500)))
        return reply, data if streamed is None else streamed

    async def _chunks(self, reader, writer, call_id: int) -> AsyncIterator[bytes]:
        """A streamed answer's chunks as the handler process sends them; its connection goes
        back to the idle ones once the answer ended, and is closed when it was left before
        (the handler process then closes the handler's iterator; a stream never started is
        closed with its connection when it is collected). It holds no slot: an answer never
        iterated would hold it for good."""
        ended = False
        try:
            while True:
                reply, data = await protocol.aread_frame(reader)
                protocol.check_id(reply, call_id)
                op = reply.get("op")
                if op == "chunk":
                    yield bytes(data)
                    continue
                if op != "end":
                    raise StatusError(
                        f"A streamed answer's iterator called {reply.get('fn') or op}: the "
                        "built-in formats answer a handler's call, not its streamed chunks",
                        500,
                    )
                ended = True
                if "message" in reply:
                    raise StatusError(str(reply["message"]), int(reply.get("status", 500)))
                return
        except (asyncio.IncompleteReadError, ConnectionError, protocol.ProtocolError) as exc:
            log.error("the handler process ended in the middle of a streamed answer: %r", exc)
            raise HandlerProcessError(
                "The handler process ended in the middle of the streamed answer (see the log)",
                500,
            ) from None
        finally:
            if ended:
                self._idle.append((reader, writer))
            else:
                writer.close()

    async def _exchange(self, reader, writer, header, body, context, callbacks):
        await protocol.awrite_frame(writer, header, body)
        while True:
            reply, data = await protocol.aread_frame(reader)
            protocol.check_id(reply, header["id"])
            if reply.get("op") != "callback":
                return reply, data
            answer, answer_body = await callbacks(str(reply.get("fn")), reply, bytes(data), context)
            await protocol.awrite_frame(
                writer, {"op": "reply", **answer, "id": header["id"]}, answer_body
            )

    async def _connection(self):
        while self._idle:
            reader, writer = self._idle.pop()
            if not (reader.at_eof() or writer.is_closing()):
                return reader, writer
            writer.close()
        try:
            return await self._open()
        except OSError as exc:
            self.unreachable = True  # multimodel/code.py revives a pool that is gone
            log.error("cannot reach the handler processes at %s: %r", self.socket_path, exc)
            raise HandlerProcessError(
                "The handler processes are not running (they may be restarting): try again", 503
            ) from None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to one of this pool's own processes. A 503 when another process
        answers (a socket taken over by another process of the stack's user, such as another
        model's): the pool is marked taken over, for a new one in a new folder (code.py)."""
        reader, writer = await asyncio.open_unix_connection(self.socket_path, limit=1 << 20)
        sock = writer.get_extra_info("socket")
        pid, _, _ = PEER.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER.size))
        if not member(pid, os.path.dirname(self.socket_path)):
            writer.close()
            self.unreachable = self.taken_over = True
            log.error(
                "the handler socket %s was answered by process %d, which is not one of its "
                "handler processes (another process took the socket over)",
                self.socket_path,
                pid,
            )
            raise HandlerProcessError(
                "The handler processes' socket was answered by another process: try again", 503
            )
        return reader, writer

    async def alive(self) -> bool:
        """Whether a handler process answers (for /ping): a hello on a connection of its own,
        answered within PING_SECONDS (the socket alone takes connections with none running)."""
        try:
            async with asyncio.timeout(PING_SECONDS):
                reader, writer = await self._open()
                try:
                    await protocol.awrite_frame(writer, {"op": "hello"})
                    reply, _ = await protocol.aread_frame(reader)
                finally:
                    writer.close()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, protocol.ProtocolError):
            return False
        except HandlerProcessError:  # another process answered (logged)
            return False
        return reply.get("op") == "ready"

    def close(self) -> None:
        """Close the idle connections (from any thread: on their event loop)."""
        idle, self._idle = self._idle, []
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for _, writer in idle:
            loop.call_soon_threadsafe(writer.close)


def pool_handlers(directory: Path, code: Path, size: int, deadline: float) -> Handlers:
    """The handlers of `code` that the pool in `directory` runs, once it is ready (PoolError
    as pool.wait_ready), with up to `size` connections from this worker."""
    functions = tuple(wait_ready(directory, deadline))
    remote = HandlerPool(str(directory / SOCKET_NAME), functions, size)
    return Handlers(source=f"{code} (handler processes)", remote=remote)
