"""POST /invocations (and multi-model invoke): the HTTP side of one request: its id, route,
Context and deadline, the pipeline (pipeline.py), then the answer or the error written."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import falcon
from falcon.asgi import Request, Response

from sagemaker_serving.config.body_formats import DEFAULT_TYPE, JSON
from sagemaker_serving.config.log_setup import REQUEST_ID
from sagemaker_serving.config.routing_rules import HEADER as ATTRIBUTES_HEADER
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.builtin import BuiltinFormats
from sagemaker_serving.service import streaming
from sagemaker_serving.service.error_answers import (
    REQUEST_ENDING,
    status_and_message,
    write_error,
)
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.pipeline import Pipeline
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.service.routing import Route, parse_route
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.user_code import defaults
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import Handlers


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
        formats = BuiltinFormats(self.client, metrics.records)
        defaults.install(formats)  # what default_input/output_handler do in this worker
        self.pipeline = Pipeline(placement, self.client, formats, metrics)

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
            # A handler that overruns the deadline is answered 504 (JSON) by nginx at its
            # proxy timeout; its thread (or the event loop) is never interrupted.
            answer = await self.pipeline.run_body(handlers, req.stream, context)
            if time.monotonic() > deadline + 0.5:
                raise StatusError(
                    f"The request did not finish within {self.config.request_timeout_seconds:g}s",
                    504,
                )
            if streaming.is_stream(answer.body):
                chunks = await streaming.started(answer.body, self.placement)
                if chunks is not None:
                    limit = self.config.max_response_bytes
                    streaming.send_stream(
                        req, resp, chunks, answer.content_type, self.placement, limit
                    )
                    return
                events = streaming.wants_events(req.get_header("Accept"))  # none: an empty one
                answer = answer._replace(
                    body=b"", content_type=streaming.EVENT_STREAM if events else answer.content_type
                )
            body = answer.body
            if label and answer.status != 200 and answer.content_type == JSON:  # the model server's
                body = _named(bytes(body).decode(), model_name, json.dumps(label)[1:-1]).encode()
            limit = self.config.max_response_bytes
            if limit is not None and len(body) > limit:
                raise StatusError(
                    f"The answer is {len(body)} bytes, over SAGEMAKER_MAX_RESPONSE_SIZE ({limit})",
                    500,
                )
            write_answer(resp, body)
            resp.content_type = answer.content_type
            resp.status = falcon.code_to_http_status(answer.status)
        except REQUEST_ENDING:
            raise
        except BaseException as exc:  # sys.exit() in a handler too (error_answers)
            status, message = status_and_message(exc, "handler failed")
            quoted = (*getattr(exc, "quoted", ()), *((label,) if label else ()))
            write_error(resp, status, _named(message, model_name, label), request_id, quoted)
        finally:  # counted when nginx sends the answer (launcher/request_counts.py)
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
