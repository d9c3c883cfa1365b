"""The frames between the service and its handler processes."""

from __future__ import annotations

import asyncio
import socket

import pytest

from sagemaker_serving.environments import protocol


def frame(header: dict, body: bytes = b"") -> bytes:
    return protocol.pack_head(header, len(body)) + body


def test_a_frame_carries_a_header_and_any_bytes():
    body = bytes(range(256)) * 3 + b"\n{}"
    left, right = socket.socketpair()
    with left, right:
        left.sendall(frame({"op": "call", "x": [1, "é"]}, body))
        assert protocol.read_frame(right) == ({"op": "call", "x": [1, "é"]}, body)


@pytest.mark.parametrize(
    "frame",
    [
        protocol.SIZES.pack(6, 0) + b"[1, 2]",
        protocol.SIZES.pack(9, 0) + b"{bad json",
        protocol.SIZES.pack(0, 0),
        protocol.SIZES.pack(protocol.MAX_HEADER_BYTES + 1, 0),
    ],
)
def test_unreadable_frames_are_protocol_errors(frame):
    left, right = socket.socketpair()
    with left, right:
        left.sendall(frame)
        with pytest.raises(protocol.ProtocolError):
            protocol.read_frame(right)

    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(frame)
        await protocol.aread_frame(reader)

    with pytest.raises(protocol.ProtocolError):
        asyncio.run(read())


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
        left.sendall(frame({"op": "call"}, b"abc")[:-2])
        left.close()
        with pytest.raises(protocol.ProtocolError):
            protocol.read_frame(right)


@pytest.mark.parametrize("body", [b"answer", b"", bytes(range(256)) * 10_000])
def test_the_async_reader_reads_what_the_blocking_writer_wrote(body):
    async def read() -> tuple[dict, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(frame({"op": "result", "ok": True}, body))
        return await protocol.aread_frame(reader)

    assert asyncio.run(read()) == ({"op": "result", "ok": True}, body)


def test_a_frame_of_another_call_is_refused():
    protocol.check_id({"op": "result", "id": 7}, 7)
    for header in ({"op": "result", "id": 8}, {"op": "result"}):
        with pytest.raises(protocol.ForeignFrame):
            protocol.check_id(header, 7)


# a host that answers its first connection's call with another call's id, then answers right;
# `--dir DIR` in its command line, as a pool's processes have (remote.py checks its peer)
STRAY_HOST = """
import socket, sys
from sagemaker_serving.environments import protocol


def frame(header: dict, body: bytes = b"") -> bytes:
    return protocol.pack_head(header, len(body)) + body
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[2] + "/socket")
listener.listen(4)
print("ready", flush=True)
for n in range(2):
    conn, _ = listener.accept()
    header, _ = protocol.read_frame(conn)
    stray = header["id"] + 1 if n == 0 else header["id"]
    reply = {"op": "result", "id": stray, "ok": True, "content_type": "text/plain"}
    protocol.write_frame(conn, reply, b"someone else's answer" if n == 0 else b"its own")
    protocol.read_frame(conn) if n else None
"""


def test_the_pool_never_delivers_an_answer_to_another_call(tmp_path):
    """A host that answers a call with another call's id (a forked child writing what its
    parent's call would answer): a 500 for this call, and the connection is not used again."""
    import subprocess
    import sys
    import time

    from sagemaker_serving.environments.remote import HandlerPool, HandlerProcessError
    from sagemaker_serving.user_code.handler_api import Context

    host = subprocess.Popen(
        [sys.executable, "-c", STRAY_HOST, "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    values = dict.fromkeys(Context._fields)
    values.update(request_id="r", deadline=time.monotonic() + 10, grpc_port=1)
    pool = HandlerPool(str(tmp_path / "socket"), ("input_handler",), size=1)

    async def calls():
        with pytest.raises(HandlerProcessError) as refused:
            await pool.run(b"x", Context(**values), None)
        assert refused.value.status == 500 and "another call" in refused.value.message
        reply, body = await pool.run(b"x", Context(**values), None)
        return bytes(body), reply["content_type"]

    try:
        assert host.stdout is not None and host.stdout.readline() == "ready\n"
        assert asyncio.run(calls()) == (b"its own", "text/plain")  # on a new connection
    finally:
        host.kill()
        host.wait(10)
