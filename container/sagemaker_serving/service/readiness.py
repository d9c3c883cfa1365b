"""GET /ping: the one readiness of the stack (nginx's /ping asks it; serve waits for it at
start). 200 with an empty body while every model is AVAILABLE on every model server instance
(single model; on a multi-model endpoint, while every instance answers), the handlers are
imported, and their processes answer when they run in processes of their own; else a JSON 503
that says why. The model servers are asked by a thread (tfs_client/health.py's InstanceWatch),
never by /ping itself, so it answers within milliseconds whatever the model servers do; /ping
only asks the kernel whether each REST port listens, so a model server that died since the
last probe is a 503 at once.
"""

from __future__ import annotations

import asyncio

import falcon
from falcon.asgi import Request, Response

from sagemaker_serving.errors import StatusError
from sagemaker_serving.tfs_client.health import InstanceWatch
from sagemaker_serving.user_code.loading import Handlers


class Ping:
    def __init__(self, handlers: Handlers, watch: InstanceWatch) -> None:
        self.remote = handlers.remote
        self.watch = watch

    async def on_get(self, req: Request, resp: Response) -> None:
        if self.watch.started():
            problem = self.watch.problem(0)
        else:  # on a thread: it waits for the first probes to answer
            problem = await asyncio.to_thread(self.watch.problem)
        if problem is None:  # a model server that died since the last probe
            problem = self.watch.refused()
        if problem is None and self.remote is not None and not await self.remote.alive():
            problem = "the handler processes are not answering"
        if problem is not None:
            raise StatusError(f"Not ready: {problem}", 503)
        resp.status = falcon.HTTP_200
        resp.content_type = "application/json"
        resp.data = b""

    on_head = on_get
