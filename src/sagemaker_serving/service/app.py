"""The Python service (falcon's ASGI app on gunicorn's uvicorn workers, behind nginx): its
routes and error handling.

/invocations: input_handler -> model server -> output_handler (or handler, or the built-in
formats; invocations.py); /ping: 200 once the handlers imported (multi-model: and while every
model server instance is up); /metrics: Prometheus text; /models: the multi-model API
(multimodel/).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from pathlib import Path
from typing import Any

import falcon
import falcon.asgi
import orjson
from falcon.asgi import Request, Response

from sagemaker_serving.config.access import TOKEN_HEADER
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments import pool
from sagemaker_serving.environments.remote import HandlerPool
from sagemaker_serving.service.invocations import Invocations, json_error
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.service.user_code import Handlers, load_handlers
from sagemaker_serving.tfs_client.health import InstanceWatch

log = logging.getLogger("sagemaker_serving.service")


class Ping:
    """200 (empty) once the handlers imported, and while their processes answer when they
    have processes of their own; on a multi-model endpoint, also only while every model
    server instance is up (`watch`, known without asking them now: loads keep them busy),
    else a JSON 503."""

    def __init__(self, handlers: Handlers, watch: InstanceWatch | None = None) -> None:
        self.remote = handlers.remote
        self.watch = watch

    async def on_get(self, req: Request, resp: Response) -> None:
        watch, problem = self.watch, None
        if watch is not None and watch.started():
            problem = watch.problem(0)
        elif watch is not None:  # on a thread: it waits for the first probes to answer
            problem = await asyncio.to_thread(watch.problem)
        if problem is None and self.remote is not None and not await self.remote.alive():
            problem = "the handler processes are not answering"
        if problem is not None:
            json_error(resp, 503, f"Not ready: {problem}", req.get_header("X-Request-Id") or "")
            return
        resp.status = falcon.HTTP_200
        resp.content_type = "application/json"
        resp.data = b""

    on_head = on_get


class Metrics:
    def __init__(self, metrics: ServiceMetrics, placement: Placement) -> None:
        self.metrics = metrics
        self.placement = placement

    async def on_get(self, req: Request, resp: Response) -> None:
        resp.content_type = "text/plain; version=0.0.4; charset=utf-8"
        resp.data = await self.placement.thread(self.metrics.render)  # reads every worker's file

    on_head = on_get


def endpoint_handlers(config: ServiceConfig) -> Handlers:
    """A single-model endpoint's handlers: imported here, or (config.handler_pool) run by the
    pool serve started, once it is ready."""
    code_dir = Path(config.code_dir)
    if not config.handler_pool:
        return load_handlers(code_dir, paths=config.python_paths)
    directory = Path(config.handler_pool)
    deadline = time.monotonic() + config.load_timeout_seconds
    functions = pool.wait_ready(directory, deadline, lambda: True)
    remote = HandlerPool(str(directory / pool.SOCKET_NAME), tuple(functions), config.threads)
    return Handlers(source=f"{code_dir / 'inference.py'} (handler processes)", remote=remote)


def allowed_methods(resource: object) -> list[str]:
    """The methods a resource answers (its on_* responders), OPTIONS aside."""
    return [
        name[3:].upper()
        for name in dir(resource)
        if name.startswith("on_") and name != "on_options" and callable(getattr(resource, name))
    ]


class NoOptions:
    """Middleware: OPTIONS is 405 (JSON, `Allow`: what the route answers), not falcon's 200."""

    async def process_resource(
        self, req: Request, resp: Response, resource: object, params: dict
    ) -> None:
        if req.method == "OPTIONS":
            raise falcon.HTTPMethodNotAllowed(allowed_methods(resource))


async def _http_error(req: Request, resp: Response, ex: Exception, params: dict) -> None:
    """falcon's own errors (404, 405, bad headers...) as our JSON body, with their headers."""
    assert isinstance(ex, falcon.HTTPError)
    json_error(
        resp, ex.status_code, ex.description or ex.title, req.get_header("X-Request-Id") or ""
    )
    for name, value in dict(ex.headers or {}).items():
        if name.lower() == "allow":  # falcon lists OPTIONS, which every route refuses
            value = ", ".join(m for m in value.split(", ") if m != "OPTIONS")
        resp.set_header(name, value)


async def _unexpected(req: Request, resp: Response, ex: Exception, params: dict) -> None:
    """Any other exception: a JSON 500 (the stack trace goes to the log, not the client)."""
    request_id = req.get_header("X-Request-Id") or ""
    log.error("unhandled error (request %s)", request_id, exc_info=ex)
    json_error(resp, 500, f"Internal Server Error: {type(ex).__name__}: {ex}", request_id)


def create_app(config: ServiceConfig, metrics: ServiceMetrics | None = None) -> falcon.asgi.App:
    """The falcon app; imports the user's handlers (a failure stops the worker). `metrics`:
    this process's ServiceMetrics (one per process: two would overwrite each other's values
    in the multiprocess files)."""
    handlers = Handlers() if config.multi_model else endpoint_handlers(config)
    log.info("handlers: %s", "per model" if config.multi_model else handlers.source)
    metrics = metrics or ServiceMetrics()
    placement = Placement(config.worker_class, config.threads)
    app = falcon.asgi.App(middleware=[NoOptions()])
    invocations = Invocations(config, handlers, metrics, placement)
    app.add_route("/invocations", invocations)
    watch = InstanceWatch(config.rest_ports) if config.multi_model else None
    app.add_route("/ping", Ping(handlers, watch))
    app.add_route("/metrics", Metrics(metrics, placement))
    if config.multi_model:
        _add_multi_model_routes(app, config, invocations)
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    return app


_TOKEN_NAME = TOKEN_HEADER.lower().encode("latin-1")
_FORBIDDEN = orjson.dumps({"error": "Forbidden: only the container's nginx may call the service"})
_FORBIDDEN_HEAD = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % (len(_FORBIDDEN) + 1)),
]
_FAILED = orjson.dumps({"error": "Internal Server Error"}) + b"\n"
_FAILED_HEAD = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % len(_FAILED)),
    (b"connection", b"close"),
]

Asgi = Any  # an ASGI application: async (scope, receive, send)


def guarded(app: Asgi, token: str) -> Asgi:
    """The ASGI app behind the per-run secret nginx adds to every request it proxies: a
    request without it is a 403 (JSON); the header is removed before falcon, so neither
    the handlers nor their Context ever see it. Whatever escapes the app before an answer
    started is a JSON 500, never uvicorn's plain-text page."""
    expected = token.encode()

    async def asgi(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan (the worker sends none; falcon's test client does)
            return await app(scope, receive, send)
        given, headers = b"", []
        for name, value in scope["headers"]:
            if name == _TOKEN_NAME:
                given = value
            else:
                headers.append((name, value))
        if not hmac.compare_digest(given, expected):
            await send({"type": "http.response.start", "status": 403, "headers": _FORBIDDEN_HEAD})
            await send({"type": "http.response.body", "body": _FORBIDDEN + b"\n"})
            return
        scope["headers"] = headers
        try:
            await app(scope, receive, send)
        except Exception:
            log.exception("unhandled error in the service")
            with contextlib.suppress(RuntimeError):  # uvicorn's: the answer had started
                await send({"type": "http.response.start", "status": 500, "headers": _FAILED_HEAD})
                await send({"type": "http.response.body", "body": _FAILED})

    return asgi


def _add_multi_model_routes(
    app: falcon.asgi.App, config: ServiceConfig, invocations: Invocations
) -> None:
    from sagemaker_serving.environments.build import has_user_code
    from sagemaker_serving.multimodel.api import ModelSink, ModelsResource
    from sagemaker_serving.multimodel.code import ModelCode
    from sagemaker_serving.multimodel.environments import ModelEnvironments
    from sagemaker_serving.multimodel.manager import MultiModelManager
    from sagemaker_serving.multimodel.registry import Registry

    state_dir = Path(config.state_dir)
    manager = MultiModelManager(
        Registry(state_dir),
        invocations.client,
        Path(config.model_root),
        config.load_timeout_seconds,
        config.memory_reserve_bytes,
    )
    universal_dir = Path(config.code_dir) if config.code_dir else None
    universal = None
    if universal_dir is not None and has_user_code(universal_dir):
        universal = endpoint_handlers(config)
    environments = ModelEnvironments(
        state_dir,
        Path(config.container_site),
        config.handler_processes,
        config.max_environments,
        config.memory_reserve_bytes,
        config.lifeline_fd,
        config.log_format,
        config.load_timeout_seconds,
    )
    code = ModelCode(universal_dir, universal, environments, manager.registry, config.threads)
    app.add_route("/models", ModelsResource(manager, code))
    app.add_sink(ModelSink(manager, code, invocations), prefix="/models/")
