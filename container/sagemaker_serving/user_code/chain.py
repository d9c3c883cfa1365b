"""One request through the user's handlers: `handler` alone, or input_handler, the model
server and output_handler, each result held to its contract (contract.py) where it is
returned. The service says where each step runs and what the built-in steps are (ServiceSide):
nothing here knows HTTP, threads or the model server's protocol.
"""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from typing import Any, Protocol

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


def concrete_type(accept: str | None) -> str:
    """The first non-wildcard type in Accept, else DEFAULT_TYPE (application/json; never `*/*`)."""
    for item in (accept or "").split(","):
        media = item.split(";")[0].strip()
        if media and "*" not in media:
            return media
    return DEFAULT_TYPE


def _answer(result: Any, context: Context, fn: Handler, role: str) -> tuple[bytes, str]:
    body, content_type = contract.answer(result, fn, role)
    return body, content_type or concrete_type(context.accept_header)


async def run(
    handlers: Handlers, data: io.BytesIO, context: Context, side: ServiceSide
) -> tuple[bytes, str]:
    """The answer's body and content type."""
    remote = handlers.remote
    if remote is not None and remote.has("handler"):
        with side.stage("handler"):
            body, content_type = await side.remote(remote, "handler", data.getvalue(), context)
        return body, content_type or concrete_type(context.accept_header)
    if handlers.handler is not None:
        with side.stage("handler"):  # it calls the model server: a thread
            result = await side.threaded(handlers.handler, data, context)
        return _answer(result, context, handlers.handler, "handler")
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
            return await side.builtin_answer(request, response, context)
        if remote is not None and remote.has("output_handler"):
            body, content_type = await side.remote(remote, "output_handler", b"", context, response)
            return body, content_type or concrete_type(context.accept_header)
        if handlers.output_handler is not None:
            result = await side.in_place(handlers.output_handler, response, context)
            return _answer(result, context, handlers.output_handler, "output_handler")
        return await side.builtin_answer(request, response, context)
