"""POST /invocations (and multi-model invoke): one request through the user's handlers or the
built-in formats, to the model server and back, within its deadline. The hop to the model
server is made from the event loop; handlers run where placement.py puts them."""

from __future__ import annotations

import io
import time
import uuid
from dataclasses import replace
from typing import Any

from falcon.asgi import Request, Response

from sagemaker_serving.config.log_setup import REQUEST_ID
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments.messages import make_response, response_meta
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.request import ModelRequest
from sagemaker_serving.formats.tensors import TensorRequest
from sagemaker_serving.service.default_handlers import LARGE_PAYLOAD, BuiltinFormats
from sagemaker_serving.service.error_answers import status_and_message, write_error
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.service.routing import Route, parse_route
from sagemaker_serving.tfs_client import wire as tfs_wire
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.user_code import contract as handler_contract
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import HandlerProcesses, Handlers


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


class Invocations:
    """POST /invocations: one request through the handlers, within its deadline."""

    def __init__(
        self,
        config: ServiceConfig,
        handlers: Handlers,
        metrics: ServiceMetrics,
        placement: Placement,
    ) -> None:
        self.config = config
        self.handlers = handlers
        self.metrics = metrics
        self.placement = placement
        self.client = ModelServerClient(config.rest_ports, config.grpc_ports)
        self.formats = BuiltinFormats(self.client, metrics)

    async def on_post(self, req: Request, resp: Response) -> None:
        if self.config.multi_model:
            raise StatusError(
                "This is a multi-model endpoint: invoke a model with POST /models/<name>/invoke",
                400,
            )
        await self.respond(req, resp, self.handlers)

    async def respond(
        self,
        req: Request,
        resp: Response,
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
            data = io.BytesIO(await req.stream.read())
            # A handler that overruns the deadline is answered 504 (JSON) by nginx at its
            # proxy timeout; its thread (or the event loop) is never interrupted.
            body, content_type = await self._run(data, context, handlers)
            if time.monotonic() > deadline + 0.5:
                raise StatusError(
                    f"The request did not finish within {self.config.request_timeout_seconds:g}s",
                    504,
                )
            resp.data = body
            resp.content_type = content_type
            status = 200
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() in a handler too
            status, message = status_and_message(exc, "handler failed")
            write_error(resp, status, _named(message, model_name, label), request_id)
        finally:
            self.metrics.request("/invocations", status, model, time.monotonic() - started)
            REQUEST_ID.reset(request_token)

    def _context(self, req: Request, route: Route, request_id: str, deadline: float):
        index = self.client.pick()
        return Context(
            model_name=route.model_given,
            model_version=route.version,
            method=route.method_given,
            rest_uri=self.client.rest.uri(index, route.path()),
            grpc_port=self.client.grpc_ports[index],
            channel=self.client.grpc.channel(index),
            custom_attributes=req.get_header("X-Amzn-SageMaker-Custom-Attributes"),
            request_content_type=req.get_header("Content-Type") or "application/json",
            accept_header=req.get_header("Accept") or "application/json",
            content_length=req.content_length,
            request_id=request_id,
            deadline=deadline,
            timeout=max(0.0, deadline - time.monotonic()),
            default_model_name=self.config.default_model,
        )

    async def _run(
        self, data: io.BytesIO, context: Context, handlers: Handlers
    ) -> tuple[bytes, str]:
        with self.formats.active():  # handlers may call default_input/output_handler
            if handlers.remote is not None and handlers.remote.has("handler"):
                with self.metrics.stage("handler"):
                    body, content_type = await self._remote(
                        handlers.remote, "handler", data.getvalue(), context
                    )
                return body, content_type or _concrete_type(context.accept_header)
            if handlers.handler is not None:
                with self.metrics.stage("handler"):  # it calls the model server: a thread
                    result = await self.placement.thread(handlers.handler, data, context)
                return self._result(result, context, handlers.handler, "handler")
            return await self._handlers(data, context, handlers)

    async def _handlers(
        self, data: io.BytesIO, context: Context, handlers: Handlers
    ) -> tuple[bytes, str]:
        place = self.placement
        with self.metrics.stage("input_handler"):
            request: Any
            if handlers.remote is not None and handlers.remote.has("input_handler"):
                request, _ = await self._remote(
                    handlers.remote, "input_handler", data.getvalue(), context
                )
            elif handlers.input_handler is not None:
                value = await place.handler(handlers.input_handler, data, context)
                request = handler_contract.request_body(value, handlers.input_handler)
            else:
                waits = self.formats.may_wait(context, len(data.getbuffer()))
                request = await place.ours(waits, self.formats.request, data, context, True)
        with self.metrics.stage("model_server"):
            if isinstance(request, TensorRequest):
                outputs = await place.thread(self._tensor_predict, request, context)
            else:
                body = request.body if isinstance(request, ModelRequest) else request
                response = await self.client.rest.arequest(
                    "POST", context.rest_uri, body, context.deadline
                )
        with self.metrics.stage("output_handler"):
            if isinstance(request, TensorRequest):
                return await place.thread(self.formats.tensor_answer, outputs, context)
            if handlers.remote is not None and handlers.remote.has("output_handler"):
                meta, content = response_meta(response)
                body, content_type = await self._remote(
                    handlers.remote, "output_handler", content, context, meta
                )
                return body, content_type or _concrete_type(context.accept_header)
            if handlers.output_handler is not None:
                result = await place.handler(handlers.output_handler, response, context)
                return self._result(result, context, handlers.output_handler, "output_handler")
            large = len(response.content) > LARGE_PAYLOAD
            return await place.ours(large, self.formats.answer, response, context)

    async def _remote(
        self,
        pool: HandlerProcesses,
        fn: str,
        body: bytes,
        context: Context,
        response: dict | None = None,
    ) -> tuple[bytes, str | None]:
        """A handler in its environment's processes (environments/remote.py)."""
        return await pool.call(fn, body, context, self._callback, response)

    async def _callback(
        self, fn: str, header: dict, body: bytes, context: Context
    ) -> tuple[dict, bytes]:
        """The built-in formats, for a handler process's default_input/output_handler (with
        the context the handler passed)."""
        fields = header.get("context")
        if isinstance(fields, dict):
            context = Context(**{**fields, "channel": context.channel})
        try:
            if fn == "default_input_handler":
                waits = self.formats.may_wait(context, len(body))
                request = await self.placement.ours(
                    waits, self.formats.request, io.BytesIO(body), context, False
                )
                return {"ok": True}, request.body
            if fn == "default_output_handler":
                response = make_response(header.get("response") or {"status": 200}, body)
                large = len(body) > LARGE_PAYLOAD
                answer, content_type = await self.placement.ours(
                    large, self.formats.answer, response, context
                )
                return {"ok": True, "content_type": content_type}, answer
            raise StatusError(f"No such built-in function: {fn}", 500)
        except StatusError as exc:
            return {"ok": False, "status": exc.status, "message": exc.message}, b""

    def _tensor_predict(self, request: TensorRequest, context: Context) -> dict:
        """Built-in binary formats over gRPC: no base64, and no JSON until the reply."""
        version = int(context.model_version) if context.model_version else None
        if version is not None and version >= 2**63:
            raise StatusError(f"tfs-model-version {version} is out of range", 400)
        wire = tfs_wire.predict_request(
            context.model_name or context.default_model_name, version, None, request.inputs
        )
        index = self.client.grpc_ports.index(context.grpc_port)
        return tfs_wire.predict_outputs(self.client.grpc.predict(index, wire, context.deadline))

    def _result(self, result: Any, context: Context, fn: Any, role: str) -> tuple[bytes, str]:
        body, content_type = handler_contract.answer(result, fn, role)
        return body, content_type or _concrete_type(context.accept_header)
