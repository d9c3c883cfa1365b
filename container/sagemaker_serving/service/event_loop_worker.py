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
import os
import signal
import threading
import time
from typing import Any

from uvicorn_worker import UvicornWorker

from sagemaker_serving.service.placement import (
    handler_holds_loop,
    loop_call_overdue,
    threads_all_overdue,
)

log = logging.getLogger("sagemaker_serving.service")

WORKER_CLASS = f"{__name__}.EventLoopWorker"


class EventLoopWorker(UvicornWorker):
    """uvicorn's gunicorn worker with the service's options.

    uvicorn tells gunicorn the worker is alive from its event loop; while a user handler runs
    on the loop (placement.py), a thread tells it instead, so a slow handler does not get its
    worker killed (as on gunicorn's gthread worker), while a loop stuck anywhere else does,
    and so does a handler on it long past its request's deadline. A worker whose handler
    threads are all held that late ends itself (placement.threads_all_overdue).
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

    stuck = False  # every handler thread holds a call long past its deadline: ending
    loop_held = False  # a handler holds the loop long past its deadline (said once per call)

    def run(self) -> None:
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        super().run()  # after a SIGTERM, uvicorn raises it again once shut down: the end
        if self.stuck:  # should it return, a normal exit would wait for the stuck threads
            logging.shutdown()
            os._exit(1)  # gunicorn starts another worker

    def _heartbeat(self) -> None:
        pause = max(0.1, min(1.0, self.timeout / 4))
        while self.alive:
            time.sleep(pause)
            on_loop = handler_holds_loop()
            overdue = on_loop and loop_call_overdue()
            if on_loop and not overdue:
                self.notify()
            if overdue and not self.loop_held:  # gunicorn ends it at its timeout
                log.error(
                    "a handler has held this worker's event loop long past its request's "
                    "deadline (a handler that never returns): the worker ends, another starts"
                )
            self.loop_held = overdue
            if threads_all_overdue() and not self.stuck:
                self.stuck = True
                log.error(
                    "every handler thread of this worker holds a call long past its request's "
                    "deadline (a handler that never returns): the worker ends, another starts"
                )
                os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown
