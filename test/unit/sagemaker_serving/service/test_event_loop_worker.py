"""The service's gunicorn worker: uvicorn's event loop and protocol with the service's options
(the whole service process: test_service_process.py; what uvicorn's parser would refuse is
refused by nginx: test_error_bodies.py)."""

from __future__ import annotations

import asyncio
import socket

from uvicorn.config import Config
from uvicorn.server import Server

from sagemaker_serving.service.event_loop_worker import EventLoopWorker


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


def test_the_worker_runs_uvicorns_protocol_without_lifespan_or_server_header():
    options = EventLoopWorker.CONFIG_KWARGS
    assert options["http"] == "httptools"
    assert options["lifespan"] == "off" and options["server_header"] is False


def test_a_good_request_is_answered_without_a_server_header():
    head, _, body = _exchange(
        b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    ).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"ok"
    assert b"server:" not in head.lower()
