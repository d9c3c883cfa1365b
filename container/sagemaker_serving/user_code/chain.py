"""One request through the user's handlers: `handler` alone, or input_handler, the model
server and output_handler, each result held to its contract (contract.py) where it is
returned. The service says where each step runs and what the built-in steps are (ServiceSide):
nothing here knows HTTP, threads or the model server's protocol.

The answer's status: 200, or the model server's error status when it answered one and
output_handler made the answer from it (a pass-through `return response.content,
context.accept_header` answers a wrong shape 400 with TF Serving's body, not 200: a failed
prediction never looks like a success). Its content type: the handler's, unless that is a
wildcard echoed from Accept (`*/*`), which is no content type: then the first concrete type
Accept names, else application/json.
"""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from sagemaker_serving.config.body_formats import DEFAULT_TYPE
from sagemaker_serving.user_code import contract
from sagemaker_serving.user_code.handler_api import Context
from sagemaker_serving.user_code.loading import Handler, HandlerProcesses, Handlers


class ServiceSide(Protocol):
    """What the service does for a request's chain (service/invocations.py)."""

    def stage(self, name: str) -> AbstractContextManager[Any]:
        """Times one step of the chain (its metrics)."""
        ...

    async def in_place(self, fn: Handler, *args: Any) -> Any:
        """A user handler where its calls so far put it (the event loop or a thread)."""
        ...

    async def threaded(self, fn: Handler, *args: Any) -> Any:
        """A user handler on a thread (`handler`, which calls the model server itself)."""
        ...

    async def remote(
        self, pool: HandlerProcesses, fn: str, body: bytes, context: Context, response: Any = None
    ) -> tuple[bytes, str | None]:
        """A handler in its environment's processes (`pool`); `response` the model server's
        answer, for output_handler."""
        ...

    async def builtin_request(self, data: io.BytesIO, context: Context) -> Any:
        """The built-in formats' request for the model server."""
        ...

    async def model_server(self, request: Any, context: Context) -> Any:
        """The model server's answer to `request`."""
        ...

    def answers_itself(self, request: Any) -> bool:
        """Whether the built-in formats answer `request` whatever the handlers (a tensor
        request, made by them, answered in tensors)."""
        ...

    async def builtin_answer(
        self, request: Any, response: Any, context: Context
    ) -> tuple[bytes, str]:
        """The built-in formats' answer."""
        ...


class Answer(NamedTuple):
    body: bytes
    content_type: str
    status: int = 200


def concrete_type(accept: str | None) -> str:
    """The first non-wildcard type in Accept, else DEFAULT_TYPE (application/json; never `*/*`)."""
    for item in (accept or "").split(","):
        media = item.split(";")[0].strip()
        if media and "*" not in media:
            return media
    return DEFAULT_TYPE


def _made(body: bytes, content_type: str | None, context: Context, response: Any = None) -> Answer:
    """A handler's answer: its content type unless none or a wildcard; the model server's error
    status when `response` (what output_handler got) is one."""
    if not content_type or "*" in content_type:
        content_type = concrete_type(context.accept_header)
    status = getattr(response, "status_code", 200)
    failed = isinstance(status, int) and 400 <= status <= 599
    return Answer(body, content_type, status if failed else 200)


async def run(handlers: Handlers, data: io.BytesIO, context: Context, side: ServiceSide) -> Answer:
    """The answer: body, content type and status."""
    remote = handlers.remote
    if remote is not None and remote.has("handler"):
        with side.stage("handler"):
            body, content_type = await side.remote(remote, "handler", data.getvalue(), context)
        return _made(body, content_type, context)
    if handlers.handler is not None:
        with side.stage("handler"):  # it calls the model server: a thread
            result = await side.threaded(handlers.handler, data, context)
        return _made(*contract.answer(result, handlers.handler, "handler"), context)
    with side.stage("input_handler"):
        request: Any
        if remote is not None and remote.has("input_handler"):
            request, _ = await side.remote(remote, "input_handler", data.getvalue(), context)
        elif handlers.input_handler is not None:
            value = await side.in_place(handlers.input_handler, data, context)
            request = contract.request_body(value, handlers.input_handler)
        else:
            request = await side.builtin_request(data, context)
    with side.stage("model_server"):
        response = await side.model_server(request, context)
    with side.stage("output_handler"):
        if side.answers_itself(request):
            return Answer(*await side.builtin_answer(request, response, context))
        if remote is not None and remote.has("output_handler"):
            body, content_type = await side.remote(remote, "output_handler", b"", context, response)
            return _made(body, content_type, context, response)
        if handlers.output_handler is not None:
            result = await side.in_place(handlers.output_handler, response, context)
            answer = contract.answer(result, handlers.output_handler, "output_handler")
            return _made(*answer, context, response)
        return Answer(*await side.builtin_answer(request, response, context))
