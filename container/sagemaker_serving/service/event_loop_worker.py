"""gunicorn's worker for the service: uvicorn's event loop (uvicorn-worker) with its own
httptools protocol, no lifespan events, no `server` header or access lines.

The service listens on a unix socket that only nginx reaches, and nginx refuses what uvicorn's
parser would (malformed request lines and headers, control characters, raw bytes outside ASCII
in what it passes on as sent, unknown methods) with its own JSON answers: nothing a client
sends gets uvicorn's plain-text 400.

One worker answers many requests at once on its event loop: no thread hand-off per request,
and the hop to the model server is made from the loop too (tfs_client/http11.py).
Handlers run where service/placement.py puts them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from uvicorn_worker import UvicornWorker

from sagemaker_serving.service.placement import handler_holds_loop

WORKER_CLASS = f"{__name__}.EventLoopWorker"


class EventLoopWorker(UvicornWorker):
    """uvicorn's gunicorn worker with the service's options.

    uvicorn tells gunicorn the worker is alive from its event loop; while a user handler runs
    on the loop (placement.py), a thread tells it instead, so a slow handler never gets its
    worker killed (as on gunicorn's gthread worker), while a loop stuck anywhere else does.
    """

    CONFIG_KWARGS: dict[str, Any] = {
        "loop": "asyncio",
        "http": "httptools",
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
