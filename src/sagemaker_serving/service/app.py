"""The Python service (falcon on gunicorn, behind nginx): its routes and error handling.

/invocations: input_handler -> model server -> output_handler (or handler, or the built-in
formats; invocations.py); /ping: 200 once the handlers imported; /metrics: Prometheus text;
/models: the multi-model API (multimodel/).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import falcon
import orjson

from sagemaker_serving.config.access import TOKEN_HEADER
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.service.invocations import Invocations, json_error
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.user_code import Handlers, load_handlers

log = logging.getLogger("sagemaker_serving.service")


class Ping:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_200
        resp.content_type = "application/json"
        resp.data = b""

    on_head = on_get


class Metrics:
    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = "text/plain; version=0.0.4; charset=utf-8"
        resp.data = self.metrics.render()

    on_head = on_get


def allowed_methods(resource: object) -> list[str]:
    """The methods a resource answers (its on_* responders), OPTIONS aside."""
    return [
        name[3:].upper()
        for name in dir(resource)
        if name.startswith("on_") and name != "on_options" and callable(getattr(resource, name))
    ]


class NoOptions:
    """Middleware: OPTIONS is 405 (JSON, `Allow`: what the route answers), not falcon's 200."""

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        if req.method == "OPTIONS":
            raise falcon.HTTPMethodNotAllowed(allowed_methods(resource))


def _http_error(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict) -> None:
    """falcon's own errors (404, 405, bad headers...) as our JSON body, with their headers."""
    assert isinstance(ex, falcon.HTTPError)
    json_error(
        resp, ex.status_code, ex.description or ex.title, req.get_header("X-Request-Id") or ""
    )
    for name, value in dict(ex.headers or {}).items():
        if name.lower() == "allow":  # falcon lists OPTIONS, which every route refuses
            value = ", ".join(m for m in value.split(", ") if m != "OPTIONS")
        resp.set_header(name, value)


def _unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict) -> None:
    """Any other exception: a JSON 500 (the stack trace goes to the log, not the client)."""
    request_id = req.get_header("X-Request-Id") or ""
    log.error("unhandled error (request %s)", request_id, exc_info=ex)
    json_error(resp, 500, f"Internal Server Error: {type(ex).__name__}: {ex}", request_id)


def create_app(config: ServiceConfig, metrics: ServiceMetrics | None = None) -> falcon.App:
    """The falcon app; imports the user's handlers (a failure stops the worker). `metrics`:
    this process's ServiceMetrics (one per process: two would overwrite each other's values
    in the multiprocess files)."""
    handlers = (
        Handlers()
        if config.multi_model
        else load_handlers(Path(config.code_dir), paths=config.python_paths)
    )
    log.info("handlers: %s", "per model" if config.multi_model else handlers.source)
    metrics = metrics or ServiceMetrics()
    app = falcon.App(middleware=[NoOptions()])
    app.req_options.auto_parse_form_urlencoded = False
    invocations = Invocations(config, handlers, metrics)
    app.add_route("/invocations", invocations)
    app.add_route("/ping", Ping())
    app.add_route("/metrics", Metrics(metrics))
    if config.multi_model:
        _add_multi_model_routes(app, config, invocations)
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    return app


_TOKEN_ENVIRON = "HTTP_" + TOKEN_HEADER.upper().replace("-", "_")
_FORBIDDEN = orjson.dumps({"error": "Forbidden: only the container's nginx may call the service"})


def guarded(app: Callable, token: str) -> Callable:
    """The WSGI app behind the per-run secret nginx adds to every request it proxies: a
    request without it is a 403 (JSON); the header is removed before falcon, so neither
    the handlers nor their Context ever see it."""
    expected = token.encode()

    def wsgi(environ: dict, start_response: Callable) -> Any:
        given = environ.pop(_TOKEN_ENVIRON, "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            body = _FORBIDDEN + b"\n"
            start_response(
                "403 Forbidden",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return app(environ, start_response)

    return wsgi


def _add_multi_model_routes(
    app: falcon.App, config: ServiceConfig, invocations: Invocations
) -> None:
    from sagemaker_serving.multimodel.api import ModelSink, ModelsResource
    from sagemaker_serving.multimodel.code import ModelCode
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
    universal = Path(config.code_dir) if config.code_dir else None
    code = ModelCode(
        universal, config.python_paths, state_dir / "packages", config.load_timeout_seconds
    )
    app.add_route("/models", ModelsResource(manager, code))
    app.add_sink(ModelSink(manager, code, invocations), prefix="/models/")
