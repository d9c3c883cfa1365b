"""The frames between the service and its handler processes."""

from __future__ import annotations

import asyncio
import socket

import pytest

from sagemaker_serving.environments import protocol


def test_a_frame_carries_a_header_and_any_bytes():
    body = bytes(range(256)) * 3 + b"\n{}"
    header, data = protocol.unpack(protocol.pack({"op": "call", "x": [1, "é"]}, body)[8:])
    assert header == {"op": "call", "x": [1, "é"]} and data == body


@pytest.mark.parametrize("payload", [b"no newline", b"[1, 2]\n", b"{bad json\n"])
def test_unreadable_frames_are_protocol_errors(payload):
    with pytest.raises(protocol.ProtocolError):
        protocol.unpack(payload)


def test_frames_over_a_socket_both_ways():
    left, right = socket.socketpair()
    with left, right:
        protocol.write_frame(left, {"op": "hello"}, b"x" * 100_000)
        assert protocol.read_frame(right) == ({"op": "hello"}, b"x" * 100_000)
        left.close()
        assert protocol.read_frame(right) is None  # a clean end


def test_a_connection_closed_inside_a_frame_is_an_error():
    left, right = socket.socketpair()
    with right:
        left.sendall(protocol.pack({"op": "call"}, b"abc")[:-2])
        left.close()
        with pytest.raises(protocol.ProtocolError):
            protocol.read_frame(right)


def test_the_async_reader_reads_what_the_blocking_writer_wrote():
    async def read() -> tuple[dict, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(protocol.pack({"op": "result", "ok": True}, b"answer"))
        return await protocol.aread_frame(reader)

    assert asyncio.run(read()) == ({"op": "result", "ok": True}, b"answer")
