"""Streamed answers (InvokeEndpointWithResponseStream): a handler's iterator of chunks, or the
built-in formats' JSON Lines answered a few records at a time, each chunk sent as it comes.

The answer is HTTP/1.1 chunked and nginx passes it on unbuffered (`X-Accel-Buffering: no`).
With `Accept: text/event-stream` each chunk is one server-sent event (a `data:` line per line
of it). An error in mid-stream: with events, an `error` event holding the JSON error body,
then the end; without, the connection ends without the last chunk, so the client sees the
answer cut short (the status, 200, was sent with the first chunk). A client that disconnects:
nothing more is asked of the iterator, which is closed (a generator's `finally` runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from falcon.asgi import Response

from sagemaker_serving.config.log_setup import REQUEST_ID
from sagemaker_serving.errors import StatusError, error_body
from sagemaker_serving.formats.media import media_type
from sagemaker_serving.service.error_answers import REQUEST_ENDING, status_and_message
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.user_code import fork_guard
from sagemaker_serving.user_code.contract import chunk_bytes

log = logging.getLogger("sagemaker_serving.service")

EVENT_STREAM = "text/event-stream"
RECEIVE = "sagemaker_serving.receive"  # the ASGI scope's key of the request's receive()
_END = object()


class StreamCut(Exception):
    """Ends a chunked answer without its last chunk (logged already)."""


def wants_events(accept: str | None) -> bool:
    """Whether the client asks for server-sent events."""
    return EVENT_STREAM in map(media_type, (accept or "").split(","))


def is_stream(body: Any) -> bool:
    return isinstance(body, Iterator | AsyncIterator)


def event(data: bytes, name: str | None = None) -> bytes:
    """One server-sent event: a `data:` line per line of `data` (as UTF-8)."""
    lines = data.decode("utf-8", "replace").splitlines() or [""]
    head = f"event: {name}\n" if name else ""
    return (head + "".join(f"data: {line}\n" for line in lines) + "\n").encode()


def send_stream(
    req: Any,
    resp: Response,
    chunks: Iterator | AsyncIterator,
    content_type: str,
    placement: Placement,
    limit: int | None,
) -> None:
    """Answer 200 with `chunks` as they come (see the module's docstring)."""
    events = wants_events(req.get_header("Accept"))
    resp.content_type = EVENT_STREAM if events else content_type
    resp.set_header("X-Accel-Buffering", "no")  # nginx: pass each chunk on as it comes
    if events:
        resp.set_header("Cache-Control", "no-cache")
    request_id = resp.get_header("X-Request-Id") or ""
    receive = req.scope.get(RECEIVE)
    resp.stream = _sent(chunks, placement, events, request_id, limit, receive)


async def _sent(
    chunks: Iterator | AsyncIterator,
    placement: Placement,
    events: bool,
    request_id: str,
    limit: int | None,
    receive: Callable[[], Awaitable[dict]] | None,
) -> AsyncIterator[bytes]:
    token = REQUEST_ID.set(request_id)
    gone = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
    sent = 0
    try:
        while gone is None or not gone.done():
            chunk = await _next(chunks, placement)
            if chunk is _END:
                return
            if gone is not None and gone.done():
                break
            data = chunk_bytes(chunk)
            sent += len(data)
            if limit is not None and sent > limit:
                raise StatusError(
                    f"The streamed answer passed SAGEMAKER_MAX_RESPONSE_SIZE ({limit})", 500
                )
            if data:
                yield event(data) if events else data
        log.info("the client went away: the streamed answer stopped after %d bytes", sent)
    except REQUEST_ENDING:
        raise
    except BaseException as exc:  # a handler's SystemExit too (error_answers)
        status, message = status_and_message(exc, "the streamed answer failed")
        log.warning("the streamed answer failed after %d bytes: %s (%d)", sent, message, status)
        if not events:
            raise StreamCut(message) from None
        yield event(error_body(message, request_id), "error")
    finally:
        if gone is not None:
            gone.cancel()
        await _close(chunks, placement)
        REQUEST_ID.reset(token)


async def started(chunks: Iterator | AsyncIterator, placement: Placement) -> AsyncIterator | None:
    """`chunks` with its first chunk already made (None: there is none), so that a failure
    before it is an ordinary error answer, not a 200 cut short."""
    first = await _next(chunks, placement)
    if first is _END:
        await _close(chunks, placement)
        return None
    return _chain(first, chunks, placement)


async def _chain(first: Any, chunks: Iterator | AsyncIterator, placement: Placement):
    try:
        yield first
        while (chunk := await _next(chunks, placement)) is not _END:
            yield chunk
    finally:
        await _close(chunks, placement)


async def _next(chunks: Iterator | AsyncIterator, placement: Placement) -> Any:
    """The next chunk, or _END; a user's iterator is advanced on a thread."""
    if isinstance(chunks, AsyncIterator):
        return await anext(chunks, _END)
    return await placement.thread(fork_guard.call, next, chunks, _END, user=True)


async def _close(chunks: Iterator | AsyncIterator, placement: Placement) -> None:
    try:
        if isinstance(chunks, AsyncIterator):
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        elif (close := getattr(chunks, "close", None)) is not None:
            await placement.thread(fork_guard.call, close, user=True)
    except Exception:
        log.exception("closing the streamed answer's iterator failed")


async def _disconnected(receive: Callable[[], Awaitable[dict]]) -> None:
    """Returns once the client has gone (the request's body has been read by then)."""
    while (await receive())["type"] != "http.disconnect":
        pass
