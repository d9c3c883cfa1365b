"""The service's gunicorn worker: uvicorn's event loop with the service's options, answering
what it cannot parse with JSON (the whole service process: test_service_process.py)."""

from __future__ import annotations

import asyncio
import socket

import orjson
import pytest
from uvicorn.config import Config
from uvicorn.server import Server

from sagemaker_serving.service.event_loop_worker import EventLoopWorker, JsonErrorsProtocol


async def _ok(scope, receive, send) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


def _exchange(request: bytes) -> bytes:
    """`request` to a uvicorn server with the worker's options on a loopback socket."""
    options = {k: v for k, v in EventLoopWorker.CONFIG_KWARGS.items() if k != "loop"}
    listener = socket.create_server(("127.0.0.1", 0))

    async def run() -> bytes:
        server = Server(Config(app=_ok, log_config=None, **options))
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*listener.getsockname())
        writer.write(request)
        reply = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        server.should_exit = True
        await serving
        return reply

    return asyncio.run(run())


def test_the_worker_runs_the_json_errors_protocol_without_lifespan_or_server_header():
    options = EventLoopWorker.CONFIG_KWARGS
    assert options["http"] is JsonErrorsProtocol
    assert options["lifespan"] == "off" and options["server_header"] is False


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /pi ng HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello
        b"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    ],
)
def test_what_it_cannot_parse_is_a_json_400_and_the_connection_closes(request_bytes):
    reply = _exchange(request_bytes)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    assert b"connection: close" in head.lower()
    assert b"content-length: %d" % len(body) in head.lower()
    assert orjson.loads(body)["error"].startswith("Bad Request")


def test_a_good_request_is_answered_without_a_server_header():
    head, _, body = _exchange(
        b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    ).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"ok"
    assert b"server:" not in head.lower()


class _Transport:
    """What connection_made reads of a transport, over a real socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str, default=None):
        return {
            "socket": self.sock,
            "sockname": self.sock.getsockname(),
            "peername": self.sock.getpeername(),
        }.get(name, default)


def test_tcp_connections_get_nodelay_which_asyncio_leaves_off_gunicorns_sockets():
    from uvicorn.server import ServerState

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0, as gunicorn's
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    with listener, socket.create_connection(listener.getsockname()):
        accepted, _ = listener.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            protocol = JsonErrorsProtocol(
                Config(app=_ok), ServerState(), {}, asyncio.new_event_loop()
            )
            protocol.connection_made(_Transport(accepted))  # type: ignore[arg-type]
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            protocol.loop.close()
