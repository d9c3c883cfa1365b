"""gunicorn's worker for the service: uvicorn's event loop (uvicorn-worker) with httptools,
no lifespan events, no `server` header or access lines, and JSON for what it refuses itself.

One worker answers many requests at once on its event loop: no thread hand-off per request,
and the hop to the model server is made from the loop too (tfs_client/http11.py).
Handlers run where service/placement.py puts them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn_worker import UvicornWorker

from sagemaker_serving.errors import error_body
from sagemaker_serving.service.placement import handler_holds_loop

WORKER_CLASS = f"{__name__}.EventLoopWorker"


class JsonErrorsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol; a request it cannot parse is answered with a JSON 400."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # asyncio sets TCP_NODELAY only on sockets made with IPPROTO_TCP, and gunicorn makes
        # its listeners with protocol 0: without it, a kept-alive client waits 40 ms for the
        # body that follows an answer's head (Nagle's algorithm and delayed ACKs)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)

    def send_400_response(self, msg: str) -> None:
        body = error_body(f"Bad Request: {msg}", "")  # no request was read: it has no id
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[400],
                    b"content-type: application/json\r\n",
                    b"content-length: %d\r\n" % len(body),
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()


class EventLoopWorker(UvicornWorker):
    """uvicorn's gunicorn worker with the service's protocol and options.

    uvicorn tells gunicorn the worker is alive from its event loop; while a user handler runs
    on the loop (placement.py), a thread tells it instead, so a slow handler never gets its
    worker killed (as on gunicorn's gthread worker), while a loop stuck anywhere else does.
    """

    CONFIG_KWARGS: dict[str, Any] = {
        "loop": "asyncio",
        "http": JsonErrorsProtocol,
        "lifespan": "off",
        "access_log": False,
        "server_header": False,
        "proxy_headers": False,
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # in-flight requests get gunicorn's graceful time to finish, then the worker exits
        self.config.timeout_graceful_shutdown = self.cfg.graceful_timeout
        # uvicorn's lines go where the service's go (log_setup), like gunicorn's own; its
        # access lines stay off (access_log=False: nginx writes those)
        errors = logging.getLogger("uvicorn.error")
        errors.handlers.clear()
        errors.propagate = True

    def run(self) -> None:
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        super().run()

    def _heartbeat(self) -> None:
        pause = max(0.1, min(1.0, self.timeout / 4))
        while self.alive:
            time.sleep(pause)
            if handler_holds_loop():
                self.notify()
