"""One request, top-down: decode -> input handler -> model server -> output handler -> encode.

Where each step runs is decided here, from what the handlers are: the user's functions on the
worker's event loop or threads (placement.py); the whole chain in a handler process of their
own, crossed to once (environments/remote.py); the built-in formats (formats/builtin.py) where
the user wrote no function. Each result is held to the handler contract where it is returned
(user_code/contract.py).

The answer's status: 200, or the model server's error status when it answered one and the
answer was made from it, by output_handler or the built-in formats (a pass-through `return
response.content, context.accept_header` answers a wrong shape 400 with TF Serving's body,
not 200: a failed prediction never looks like a success). Its content type: the handler's,
unless none or a wildcard echoed from Accept (`*/*`): then the first concrete type Accept
names, else application/json; a list echoed from Accept (`text/csv, application/json`): its
first concrete type.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from sagemaker_serving.config.body_formats import (
    DEFAULT_TYPE,
    JSON_LINES_NAMES,
    JSON_LINES_TYPES,
    NPY,
)
from sagemaker_serving.environments.messages import make_response
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.builtin import LARGE_PAYLOAD, BuiltinFormats
from sagemaker_serving.formats.json_bodies import json_lines_groups
from sagemaker_serving.formats.media import media_type
from sagemaker_serving.formats.request import ModelRequest
from sagemaker_serving.formats.tensors import (
    NPY_HEAD,
    StreamedTensor,
    TensorRequest,
    cast_values,
)
from sagemaker_serving.service import streaming
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.tfs_client import grpc_stream
from sagemaker_serving.tfs_client import wire as tfs_wire
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.tfs_client.errors import ModelServerError
from sagemaker_serving.tfs_client.rest import error_text
from sagemaker_serving.user_code import contract, fork_guard
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import HandlerProcesses, Handlers
from tfs_rest_json.model_version import is_model_version

STREAM_RECORDS = 32  # JSON Lines records per model server request of a streamed answer
STREAMED_BODY = 8 * 1024 * 1024  # a larger x-npy body goes on to the model server as it comes
SMALL_BODY = 1 << 20  # a body up to this size is read in one piece


class Answer(NamedTuple):
    body: Any  # bytes-like, or an iterator of chunks (a streamed answer: streaming.py)
    content_type: str
    status: int = 200


def concrete_type(accept: str | None) -> str:
    """The first non-wildcard type in Accept, else DEFAULT_TYPE (application/json; never `*/*`)."""
    for item in (accept or "").split(","):
        media = item.split(";")[0].strip()
        if media and "*" not in media:
            return media
    return DEFAULT_TYPE


def streams_records(context: Context) -> bool:
    """A JSON Lines request whose answer is asked for as server-sent events: its records are
    answered a few at a time, each group's lines sent as they come (streaming.py)."""
    media = media_type(context.request_content_type)
    return media in JSON_LINES_TYPES and streaming.wants_events(context.accept_header)


def is_type_list(content_type: str) -> bool:
    """Whether a handler's content type is a list of media ranges (an Accept header echoed:
    `application/json, text/csv`), no one type."""
    items = content_type.split(",")
    return len(items) > 1 and all("/" in item for item in items)


def made(body: Any, content_type: str | None, context: Context, model_status: int = 200) -> Answer:
    """A handler's answer: its content type unless none, a wildcard or a list echoed from
    Accept (then its first concrete type); the model server's status when the answer
    output_handler made it from (`model_status`) is an error."""
    if content_type and is_type_list(content_type):
        content_type = concrete_type(content_type)
    if not content_type or "*" in content_type:
        content_type = concrete_type(context.accept_header)
    failed = isinstance(model_status, int) and 400 <= model_status <= 599
    return Answer(body, content_type, model_status if failed else 200)


async def read_body(stream: Any, length: int | None, head: bytes = b"") -> io.BytesIO:
    """The request's body (`head`, then the rest of falcon's request stream). A large one
    (or one of unknown `length`) chunk by chunk into one buffer: 1 GiB is held once, not as
    its chunks and their join (getvalue trims the buffer to the body, so a read of it all is
    that buffer, not a copy); a small one in one read (no async iterator per request)."""
    if not head and length is not None and length <= SMALL_BODY:
        return io.BytesIO(await stream.read())
    data = io.BytesIO(head)
    data.seek(0, io.SEEK_END)
    async for chunk in stream:
        data.write(chunk)
    data.getvalue()
    data.seek(0)
    return data


class Pipeline:
    """The steps of a request in one worker, and what they run on."""

    def __init__(
        self,
        placement: Placement,
        client: ModelServerClient,
        formats: BuiltinFormats,
        metrics: ServiceMetrics,
    ) -> None:
        self.placement = placement
        self.client = client
        self.formats = formats
        self.metrics = metrics

    async def run(self, handlers: Handlers, data: io.BytesIO, context: Context) -> Answer:
        if handlers.remote is not None:
            return await self._in_handler_processes(handlers.remote, data, context)
        if handlers.handler is not None:
            with self.metrics.stage("handler"):  # it calls the model server: a thread
                result = await self.placement.thread(
                    fork_guard.call, handlers.handler, data, context, user=True
                )
            return made(*contract.answer(result, handlers.handler, "handler"), context)
        no_code = handlers.input_handler is None and handlers.output_handler is None
        if no_code and streams_records(context):
            records = self._records_streamed(data.read(), context)
            return Answer(records, streaming.EVENT_STREAM)
        with self.metrics.stage("input_handler"):
            if handlers.input_handler is not None:
                fn = handlers.input_handler
                value = await self.placement.handler(fn, data, context)
                request: Any = contract.as_bytes(value)
                if request is None:  # a file-like object or a generator: user code, read there
                    read = contract.request_body
                    request = await self.placement.thread(
                        fork_guard.call, read, value, fn, user=True
                    )
            else:
                waits = self.formats.may_wait(context, len(data.getbuffer()))
                request = await self.placement.ours(waits, self.formats.decode, data, context, True)
                if isinstance(request, TensorRequest):
                    data.close()  # the tensors hold the body now (up to 1 GiB: held once)
        with self.metrics.stage("model_server"):
            response = await self._model_server(request, context)
        with self.metrics.stage("output_handler"):
            if isinstance(request, TensorRequest):  # the built-in formats answer in tensors
                answer = self.formats.tensor_answer
                return Answer(*await self.placement.thread(answer, response, context))
            if handlers.output_handler is not None:
                result = await self.placement.handler(handlers.output_handler, response, context)
                body, content_type = contract.answer(result, handlers.output_handler)
                return made(body, content_type, context, response.status_code)
            return await self._builtin_answer(response, context)

    async def run_body(self, handlers: Handlers, body: Any, context: Context) -> Answer:
        """The request with its body as it arrives (`body`, falcon's request stream): a large
        x-npy body without user code goes on to the model server as it comes, never held
        whole here (an asynchronous endpoint's, up to 1 GiB); any other is first read whole."""
        head = b""
        if (
            (context.content_length or 0) > STREAMED_BODY
            and _no_code(handlers)
            and media_type(context.request_content_type) == NPY
        ):
            head = await body.read(NPY_HEAD)
            streamed = await self.placement.ours(True, self.formats.streamed, head, context)
            if streamed is not None:
                return await self._streamed_predict(streamed, head, body, context)
        data = await read_body(body, context.content_length, head)
        return await self.run(handlers, data, context)

    async def _streamed_predict(
        self, streamed: StreamedTensor, head: bytes, body: Any, context: Context
    ) -> Answer:
        async def values() -> AsyncIterator[bytes]:
            yield head[streamed.offset :]
            async for chunk in body:
                yield chunk

        chunks = values() if streamed.source is None else cast_values(values(), streamed.source)

        wire = tfs_wire.predict_head(
            *_model(context), streamed.name, streamed.tensor, streamed.size
        )
        with self.metrics.stage("model_server"):
            reply = await grpc_stream.predict(
                context.grpc_port, wire, chunks, streamed.size, context.deadline
            )
        with self.metrics.stage("output_handler"):
            outputs = tfs_wire.predict_outputs(reply)
            return Answer(
                *await self.placement.thread(self.formats.tensor_answer, outputs, context)
            )

    async def _records_streamed(self, body: bytes, context: Context) -> AsyncIterator[bytes]:
        """A JSON Lines body's answer lines, STREAM_RECORDS records at a time, each group's
        as soon as the model server has answered it."""
        lines = context._replace(accept_header=JSON_LINES_NAMES[0])
        first = 1  # the group's first record, counted in the request
        for request in json_lines_groups(body, context.method or "predict", STREAM_RECORDS):
            self.metrics.records(request.records)
            count = request.records or 0  # (a group always has its count)
            response = await self.client.rest.arequest(
                "POST", context.rest_uri, request.body, context.deadline
            )
            if response.status_code != 200:  # its element numbers count from the group's first
                where = f"records {first}-{first + count - 1} of the request"
                raise ModelServerError(
                    f"{where} (element 0 is record {first}): {error_text(response.content)}",
                    response.status_code,
                )
            first += count
            text, _ = await self.placement.ours(False, self.formats.answer, response, lines)
            for line in bytes(text).splitlines():
                yield line + b"\n"

    async def _model_server(self, request: Any, context: Context) -> Any:
        if isinstance(request, TensorRequest):
            return await self.placement.thread(self._tensor_predict, request, context)
        body = request.body if isinstance(request, ModelRequest) else request
        return await self.client.rest.arequest("POST", context.rest_uri, body, context.deadline)

    async def _builtin_answer(self, response: Any, context: Context) -> Answer:
        """The built-in formats' answer, with the model server's status when it is an error."""
        large = len(response.content) > LARGE_PAYLOAD
        body, content_type = await self.placement.ours(
            large, self.formats.answer, response, context
        )
        return made(body, content_type, context, response.status_code)

    async def _in_handler_processes(
        self, pool: HandlerProcesses, data: io.BytesIO, context: Context
    ) -> Answer:
        """The whole chain in the handlers' own processes, in one exchange; the built-in
        output conversion here when they have no output_handler."""
        reply, body = await pool.run(data.getvalue(), context, self._builtin_for_pool)
        for step, seconds in (reply.get("took") or {}).items():
            self.metrics.stage_took(str(step), float(seconds))
        if "response" in reply:  # the model server's answer, for the built-in formats
            response = make_response(reply["response"], body)
            with self.metrics.stage("output_handler"):
                return await self._builtin_answer(response, context)
        return made(body, reply.get("content_type"), context, int(reply.get("model_status", 200)))

    async def _builtin_for_pool(
        self, fn: str, header: dict, body: bytes, context: Context
    ) -> tuple[dict, bytes]:
        """A handler process's default_input_handler or default_output_handler: the built-in
        formats here (with the context the handler passed)."""
        fields = header.get("context")
        if isinstance(fields, dict):
            context = Context(**{**fields, "channel": context.channel})
        try:
            if fn == "default_input_handler":
                waits = self.formats.may_wait(context, len(body))
                request = await self.placement.ours(
                    waits, self.formats.request, io.BytesIO(body), context
                )
                return {"ok": True}, request
            if fn == "default_output_handler":
                response = make_response(header.get("response") or {"status": 200}, body)
                answer = await self._builtin_answer(response, context)
                return {"ok": True, "content_type": answer.content_type}, bytes(answer.body)
            raise StatusError(f"No such built-in function: {fn}", 500)
        except StatusError as exc:
            return {"ok": False, "status": exc.status, "message": exc.message}, b""

    def _tensor_predict(self, request: TensorRequest, context: Context) -> dict:
        """Built-in binary formats over gRPC: no base64, and no JSON until the reply."""
        wire = tfs_wire.predict_request(*_model(context), None, request.inputs)
        request.inputs.clear()  # the body they are views of goes: the serialized request is all
        index = self.client.grpc_ports.index(context.grpc_port)
        return tfs_wire.predict_outputs(self.client.grpc.predict(index, wire, context.deadline))


def _no_code(handlers: Handlers) -> bool:
    """No user function at all: the built-in formats do every step."""
    functions = (handlers.handler, handlers.input_handler, handlers.output_handler)
    return handlers.remote is None and functions == (None, None, None)


def _model(context: Context) -> tuple[str, int | None]:
    """The model a request names and its version (tfs-model-version), checked as TF Serving's
    gRPC takes it."""
    version = int(context.model_version) if context.model_version else None
    if version is not None and not is_model_version(version):
        raise StatusError(f"tfs-model-version {version} is out of range", 400)
    return context.model_name or context.default_model_name, version
