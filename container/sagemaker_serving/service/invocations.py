"""POST /invocations (and multi-model invoke): one request through the user's handlers or the
built-in formats, to the model server and back, within its deadline. The hop to the model
server is made from the event loop; handlers run where placement.py puts them."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import falcon
from falcon.asgi import Request, Response

from sagemaker_serving.config.body_formats import DEFAULT_TYPE
from sagemaker_serving.config.log_setup import REQUEST_ID
from sagemaker_serving.config.routing_rules import HEADER as ATTRIBUTES_HEADER
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
from sagemaker_serving.user_code import chain, fork_guard
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import Handler, HandlerProcesses, Handlers
from tfs_rest_json.model_version import is_model_version


def _named(message: str, internal: str | None, name: str | None) -> str:
    """A multi-model error in the client's words: the model server's name of the model
    (mme-<hash>) replaced by the name the client invoked."""
    return message.replace(internal, name) if internal and name else message


ANSWER_PIECE = 1 << 20  # a larger answer goes out in pieces of this size


def write_answer(resp: Response, body: bytes | bytearray) -> None:
    """The answer's body; a large one in pieces, each written as the client takes it (written
    at once, the event loop's transport would hold a copy of all it could not send yet)."""
    if len(body) <= ANSWER_PIECE:
        resp.data = bytes(body)
        return
    resp.content_length = len(body)
    resp.stream = _pieces(memoryview(body))


async def _pieces(view: memoryview) -> AsyncIterator[bytes]:
    for start in range(0, len(view), ANSWER_PIECE):
        yield bytes(view[start : start + ANSWER_PIECE])


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
        where `label` is the client's name of it), else the routing header or the default
        decides."""
        request_id = req.get_header("X-Request-Id") or uuid.uuid4().hex
        resp.set_header("X-Request-Id", request_id)
        request_token = REQUEST_ID.set(request_id)  # on every log line of this request
        deadline = time.monotonic() + self.config.request_timeout_seconds
        try:
            route = parse_route(
                req.get_header(ATTRIBUTES_HEADER),
                model_name or self.config.default_model,
            )
            if model_name is not None:
                route = replace(route, model=model_name, model_given=model_name)
            context = self._context(req, route, request_id, deadline)
            data = io.BytesIO(await req.stream.read())
            # A handler that overruns the deadline is answered 504 (JSON) by nginx at its
            # proxy timeout; its thread (or the event loop) is never interrupted.
            with self.formats.active():  # handlers may call default_input/output_handler
                answer = await chain.run(handlers, data, context, self)
            if time.monotonic() > deadline + 0.5:
                raise StatusError(
                    f"The request did not finish within {self.config.request_timeout_seconds:g}s",
                    504,
                )
            write_answer(resp, answer.body)
            resp.content_type = answer.content_type
            resp.status = falcon.code_to_http_status(answer.status)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() in a handler too
            status, message = status_and_message(exc, "handler failed")
            quoted = (*getattr(exc, "quoted", ()), *((label,) if label else ()))
            write_error(resp, status, _named(message, model_name, label), request_id, quoted)
        finally:  # counted by nginx when it sends the answer (front_metrics.py)
            REQUEST_ID.reset(request_token)

    def _context(self, req: Request, route: Route, request_id: str, deadline: float):
        target = self.client.next_target()
        return Context(
            model_name=route.model_given,
            model_version=route.version,
            method=route.method_given,
            rest_uri=target.rest_base + route.path(),
            grpc_port=target.grpc_port,
            channel=target.channel or self.client.connect(target),
            custom_attributes=req.get_header(ATTRIBUTES_HEADER),
            request_content_type=req.get_header("Content-Type") or DEFAULT_TYPE,
            accept_header=req.get_header("Accept") or DEFAULT_TYPE,
            content_length=req.content_length,
            request_id=request_id,
            deadline=deadline,
            timeout=max(0.0, deadline - time.monotonic()),
            default_model_name=self.config.default_model,
        )

    # ----- what the service does for user_code.chain (its ServiceSide) ----------------------

    def stage(self, name: str) -> AbstractContextManager[Any]:
        return self.metrics.stage(name)

    async def in_place(self, fn: Handler, *args: Any) -> Any:
        return await self.placement.handler(fn, *args)

    async def threaded(self, fn: Handler, *args: Any) -> Any:
        return await self.placement.thread(fork_guard.call, fn, *args)

    async def remote(
        self, pool: HandlerProcesses, fn: str, body: bytes, context: Context, response: Any = None
    ) -> tuple[bytes, str | None]:
        """A handler in its environment's processes (environments/remote.py)."""
        meta = None
        if response is not None:
            meta, body = response_meta(response)
        return await pool.call(fn, body, context, self._callback, meta)

    async def builtin_request(self, data: io.BytesIO, context: Context) -> Any:
        waits = self.formats.may_wait(context, len(data.getbuffer()))
        return await self.placement.ours(waits, self.formats.request, data, context, True)

    async def model_server(self, request: Any, context: Context) -> Any:
        if isinstance(request, TensorRequest):
            return await self.placement.thread(self._tensor_predict, request, context)
        body = request.body if isinstance(request, ModelRequest) else request
        return await self.client.rest.arequest("POST", context.rest_uri, body, context.deadline)

    def answers_itself(self, request: Any) -> bool:
        return isinstance(request, TensorRequest)

    async def builtin_answer(
        self, request: Any, response: Any, context: Context
    ) -> tuple[bytes, str]:
        if isinstance(request, TensorRequest):
            return await self.placement.thread(self.formats.tensor_answer, response, context)
        large = len(response.content) > LARGE_PAYLOAD
        return await self.placement.ours(large, self.formats.answer, response, context)

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
        if version is not None and not is_model_version(version):
            raise StatusError(f"tfs-model-version {version} is out of range", 400)
        wire = tfs_wire.predict_request(
            context.model_name or context.default_model_name, version, None, request.inputs
        )
        index = self.client.grpc_ports.index(context.grpc_port)
        return tfs_wire.predict_outputs(self.client.grpc.predict(index, wire, context.deadline))
