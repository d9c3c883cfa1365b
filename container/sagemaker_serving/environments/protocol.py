"""Frames between the service and its handler processes, on a unix stream socket.

A frame: the lengths of its JSON header and of its body (4 and 8 bytes, big-endian), the
header, then the raw body.

    service -> host   {"op": "run", "id": N, "context": {...}}                  + data
    host -> service   {"op": "result", "id": N, "ok": true, "took": {step: seconds},
                       "content_type": "..." | null, "model_status": 200}     + answer
                      {"op": "result", "id": N, "ok": true, "took": {...},
                       "response": {"status": 200, "reason": "OK", "headers": {...},
                                    "url": "..."}}              + the model server's answer
                      {"op": "result", "id": N, "ok": false, "status": 500, "message": "..."}
                      {"op": "result", "id": N, "ok": true, "stream": true, ...}: a streamed
                      answer, then {"op": "chunk", "id": N} + chunk for each chunk, and
                      {"op": "end", "id": N} (with "status" and "message" when it failed)
    host -> service   {"op": "callback", "id": N, "fn": "default_input_handler", ...} (the
                      built-in formats run in the service)
    service -> host   {"op": "reply", "id": N, "ok": ..., ...}                  + body
    service -> host   {"op": "hello"}  ->  {"op": "ready", "functions": [...], "pid": N}

A request crosses once: the host runs the whole chain (input_handler, the model server,
output_handler; or handler) and answers with the result, or with the model server's answer
when it has no output_handler (the service's built-in formats write it).
Every frame of a call carries the call's id: a frame with another id is a ForeignFrame (the
connection is dropped), never taken as this call's answer.

Standard library only: the host side runs under the user's interpreter.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asyncio import StreamReader, StreamWriter

SIZES = struct.Struct(">IQ")  # the header's length, the body's
MAX_HEADER_BYTES = 1 << 20
CHUNK = 1 << 20  # bodies are read and written in pieces of this size


class ProtocolError(Exception):
    """A frame that cannot be read: the connection is not usable any more."""


class ForeignFrame(ProtocolError):
    """A frame that belongs to another call than the one in progress."""


def check_id(header: dict[str, Any], call_id: object) -> None:
    """A frame of the call `call_id`, or ForeignFrame."""
    if header.get("id") != call_id:
        raise ForeignFrame(f"a frame of call {header.get('id')!r} while call {call_id!r} ran")


def pack_head(header: dict[str, Any], body_size: int) -> bytes:
    """A frame's lengths and header: its body follows."""
    head = json.dumps(header, separators=(",", ":")).encode()
    return SIZES.pack(len(head), body_size) + head


def header_size(sizes: bytes) -> tuple[int, int]:
    """(the header's length, the body's) from a frame's first bytes."""
    head, body = SIZES.unpack(sizes)
    if head > MAX_HEADER_BYTES:
        raise ProtocolError(f"a frame header of {head} bytes (at most {MAX_HEADER_BYTES})")
    return head, body


def parse_header(data: bytes) -> dict[str, Any]:
    try:
        header = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"an unreadable frame header: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("a frame header that is not an object")
    return header


def recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    """`size` bytes, or None when the peer closed before the first one."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, CHUNK))
        if not chunk:
            if left == size:
                return None
            raise ProtocolError("the peer closed the connection inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> tuple[dict[str, Any], bytes] | None:
    """The next frame (blocking), or None at a clean end of the connection."""
    sizes = recv_exactly(sock, SIZES.size)
    if sizes is None:
        return None
    head, size = header_size(sizes)
    header, body = recv_exactly(sock, head), recv_exactly(sock, size)
    if header is None or body is None:
        raise ProtocolError("the peer closed the connection inside a frame")
    return parse_header(header), body


def write_frame(sock: socket.socket, header: dict[str, Any], body: bytes = b"") -> None:
    sock.sendall(pack_head(header, len(body)))
    if body:
        sock.sendall(body)  # not joined to the head: no copy of a large body


async def aread_frame(reader: StreamReader) -> tuple[dict[str, Any], bytearray]:
    """The next frame from an asyncio stream (IncompleteReadError at the end). The body is read
    in CHUNK pieces into one buffer of its size: a large answer is held once, not twice."""
    head, size = header_size(await reader.readexactly(SIZES.size))
    header = parse_header(await reader.readexactly(head))
    body = bytearray(size)
    view = memoryview(body)
    for start in range(0, size, CHUNK):
        view[start : start + CHUNK] = await reader.readexactly(min(size - start, CHUNK))
    return header, body


async def awrite_frame(writer: StreamWriter, header: dict[str, Any], body: bytes = b"") -> None:
    """A frame to an asyncio stream, its body in CHUNK pieces as the peer takes them (the
    transport never holds a copy of a large body)."""
    writer.write(pack_head(header, len(body)))
    view = memoryview(body)
    for start in range(0, len(view), CHUNK):
        writer.write(view[start : start + CHUNK])
        await writer.drain()
    await writer.drain()
