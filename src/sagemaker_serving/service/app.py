"""The Python service (falcon on gunicorn, behind nginx): runs the user's handlers.

/invocations: input_handler -> model server -> output_handler (or handler, or the built-in
formats); /ping: 200 once the handlers imported; /metrics: Prometheus text.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import falcon
import orjson

from sagemaker_serving.config.access import TOKEN_HEADER
from sagemaker_serving.config.log_setup import REQUEST_ID
from sagemaker_serving.formats import payloads
from sagemaker_serving.formats.tensors import TensorRequest
from sagemaker_serving.service.default_handlers import BuiltinFormats
from sagemaker_serving.service.handler_api import Context, HandlerError
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.routing import Route, parse_route
from sagemaker_serving.service.user_code import Handlers, load_handlers
from sagemaker_serving.tfs_client import wire as tfs_wire
from sagemaker_serving.tfs_client.rest import ModelServerClient

log = logging.getLogger("sagemaker_serving.service")


@dataclass(frozen=True)
class ServiceConfig:
    """What serve tells the service (written as JSON into the run directory)."""

    code_dir: str
    default_model: str
    rest_ports: list[int]
    grpc_ports: list[int]
    request_timeout_seconds: float
    python_paths: list[str] = field(default_factory=list)
    # multi-model endpoints (multi_model.py)
    multi_model: bool = False
    model_root: str = ""
    state_dir: str = ""
    load_timeout_seconds: float = 300.0
    memory_reserve_bytes: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_file(cls, path: Path) -> ServiceConfig:
        return cls(**json.loads(path.read_text()))


def _json_error(resp: falcon.Response, status: int, message: str, request_id: str) -> None:
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = "application/json"
    resp.data = orjson.dumps({"error": message, "request_id": request_id}) + b"\n"


def _named(message: str, internal: str | None, name: str | None) -> str:
    """A multi-model error in the client's words: the model server's name of the model
    (mme-<hash>) replaced by the name the client invoked."""
    return message.replace(internal, name) if internal and name else message


def _concrete_type(accept: str | None) -> str:
    """The first non-wildcard type in Accept, else application/json (never `*/*`)."""
    for item in (accept or "").split(","):
        media = item.split(";")[0].strip()
        if media and "*" not in media:
            return media
    return "application/json"


def _as_body(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


class Invocations:
    """POST /invocations: one request through the handlers, within its deadline."""

    def __init__(self, config: ServiceConfig, handlers: Handlers, metrics: ServiceMetrics) -> None:
        self.config = config
        self.handlers = handlers
        self.metrics = metrics
        self.client = ModelServerClient(config.rest_ports, config.grpc_ports)
        self.formats = BuiltinFormats(self.client, metrics)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.config.multi_model:
            _json_error(
                resp,
                400,
                "This is a multi-model endpoint: invoke a model with POST /models/<name>/invoke",
                req.get_header("X-Request-Id") or "",
            )
            return
        self.respond(req, resp, self.handlers)

    def respond(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        handlers: Handlers,
        model_name: str | None = None,
        label: str | None = None,
    ) -> None:
        """One request through `handlers`; `model_name` fixes the model (multi-model invoke,
        where `label` names it in metrics), else the routing header or the default decides."""
        started = time.monotonic()
        request_id = req.get_header("X-Request-Id") or uuid.uuid4().hex
        resp.set_header("X-Request-Id", request_id)
        request_token = REQUEST_ID.set(request_id)  # on every log line of this request
        deadline = started + self.config.request_timeout_seconds
        model, status = label or model_name or self.config.default_model, 500
        try:
            route = parse_route(
                req.get_header("X-Amzn-SageMaker-Custom-Attributes"),
                model_name or self.config.default_model,
            )
            if model_name is not None:
                route = replace(route, model=model_name, model_given=model_name)
            model = label or route.model
            context = self._context(req, route, request_id, deadline)
            # The handler runs on this gunicorn thread. One that overruns the deadline is
            # answered 504 (JSON) by nginx at its proxy timeout; the worker is never killed.
            body, content_type = self._run(req.bounded_stream, context, handlers)
            if time.monotonic() > deadline + 0.5:
                raise HandlerError(
                    f"The request did not finish within {self.config.request_timeout_seconds:g}s",
                    504,
                )
            resp.data = body
            resp.content_type = content_type
            status = 200
        except (HandlerError, payloads.PayloadError) as exc:
            status = exc.status
            _json_error(resp, status, _named(exc.message, model_name, label), request_id)
        except falcon.HTTPError as exc:
            status = exc.status_code
            _json_error(resp, status, exc.description or exc.title, request_id)
        except Exception as exc:
            log.exception("handler failed")
            _json_error(resp, 500, f"{type(exc).__name__}: {exc}", request_id)
        finally:
            self.metrics.request("/invocations", status, model, time.monotonic() - started)
            REQUEST_ID.reset(request_token)

    def _context(self, req: falcon.Request, route: Route, request_id: str, deadline: float):
        index = self.client.pick()
        return Context(
            model_name=route.model_given,
            model_version=route.version,
            method=route.method_given,
            rest_uri=self.client.rest_uri(index, route.path()),
            grpc_port=self.config.grpc_ports[index],
            channel=self.client.channel(index),
            custom_attributes=req.get_header("X-Amzn-SageMaker-Custom-Attributes"),
            request_content_type=req.get_header("Content-Type") or "application/json",
            accept_header=req.get_header("Accept") or "application/json",
            content_length=req.content_length,
            request_id=request_id,
            deadline=deadline,
            timeout=max(0.0, deadline - time.monotonic()),
            default_model_name=self.config.default_model,
        )

    # ----- runs on a handler thread -----------------------------------------------------------
    def _run(self, data: Any, context: Context, handlers: Handlers) -> tuple[bytes, str]:
        with self.formats.active():  # handlers may call default_input/output_handler
            if handlers.handler is not None:
                with self.metrics.stage("handler"):
                    result = handlers.handler(data, context)
                return self._result(result, context)
            return self._handlers(data, context, handlers)

    def _handlers(self, data: Any, context: Context, handlers: Handlers) -> tuple[bytes, str]:
        with self.metrics.stage("input_handler"):
            if handlers.input_handler is not None:
                request: Any = handlers.input_handler(data, context)
            else:
                request = self.formats.request(data, context, tensors=True)
        with self.metrics.stage("model_server"):
            if isinstance(request, TensorRequest):
                outputs = self._tensor_predict(request, context)
            else:
                body = request.body if isinstance(request, payloads.ModelRequest) else request
                response = self.client.request("POST", context.rest_uri, body, context.deadline)
        with self.metrics.stage("output_handler"):
            if isinstance(request, TensorRequest):
                return self.formats.tensor_answer(outputs, context)
            if handlers.output_handler is not None:
                return self._result(handlers.output_handler(response, context), context)
            return self.formats.answer(response, context)

    def _tensor_predict(self, request: TensorRequest, context: Context) -> dict:
        """Built-in binary formats over gRPC: no base64, and no JSON until the reply."""
        version = int(context.model_version) if context.model_version else None
        if version is not None and version >= 2**63:
            raise HandlerError(f"tfs-model-version {version} is out of range", 400)
        wire = tfs_wire.predict_request(
            context.model_name or context.default_model_name, version, None, request.inputs
        )
        index = self.client.grpc_ports.index(context.grpc_port)
        return tfs_wire.predict_outputs(self.client.predict(index, wire, context.deadline))

    def _result(self, result: Any, context: Context) -> tuple[bytes, str]:
        if isinstance(result, tuple) and len(result) == 2:
            body, content_type = result
        else:
            body, content_type = result, None
        return _as_body(body), content_type or _concrete_type(context.accept_header)


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
    _json_error(
        resp, ex.status_code, ex.description or ex.title, req.get_header("X-Request-Id") or ""
    )
    for name, value in (ex.headers or {}).items():
        if name.lower() == "allow":  # falcon lists OPTIONS, which every route refuses
            value = ", ".join(m for m in value.split(", ") if m != "OPTIONS")
        resp.set_header(name, value)


def _unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict) -> None:
    """Any other exception: a JSON 500 (the stack trace goes to the log, not the client)."""
    request_id = req.get_header("X-Request-Id") or ""
    log.error("unhandled error (request %s)", request_id, exc_info=ex)
    _json_error(resp, 500, f"Internal Server Error: {type(ex).__name__}: {ex}", request_id)


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


def _add_multi_model_routes(app: falcon.App, config: ServiceConfig, invocations: Invocations):
    from sagemaker_serving.multimodel.api import ModelCode, ModelSink, ModelsResource
    from sagemaker_serving.multimodel.manager import MultiModelManager, Registry

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
