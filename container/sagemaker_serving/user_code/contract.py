"""What the user's handlers must return, checked where they return it (the AWS contract).

`input_handler(data, context)` returns the model server's request body: a JSON string or
bytes-like, or what the AWS container's `requests.post(data=...)` also sends, a file-like
object (`data` itself passed on) or an iterator of such chunks. `output_handler(response,
context)` and `handler(data, context)` return `(body, content_type)`, body a string or
bytes-like, content_type a string of printable ASCII (an HTTP header value) or None (then the
type Accept asks for); body may also be an iterator (a generator) of such chunks, alone or in
the pair: a streamed answer (service/streaming.py). Anything else, a bare body too (the AWS
container unpacks two values: a bare body fails there, or is cut in two), is a
HandlerResultError (a 500) that names the handler, where it is, what it returned and what was
expected.

Standard library only: handler processes run it under the user's interpreter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

from sagemaker_serving.errors import StatusError

_BODY = "a str or bytes-like body"
EXPECTED = {
    "input_handler": (
        "a str (JSON) or bytes-like request body for the model server (or a file-like"
        " object or an iterator of such chunks)"
    ),
    "output_handler": f"a (body, content_type) pair with {_BODY}",
    "handler": f"a (body, content_type) pair with {_BODY}",
}
_REPR_CHARS = 60
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # what a Content-Type header may hold


class HandlerResultError(StatusError, TypeError):
    """A handler returned what the contract does not allow (an error of the user's code: 500)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 500)


def where(fn: Callable) -> str:
    """`name (file, line N)` of a user function, without the folders."""
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", "handler")
    if code is None:
        return name
    return f"{name} ({os.path.basename(code.co_filename)}, line {code.co_firstlineno})"


def _what(value: Any) -> str:
    text = repr(value)
    if len(text) > _REPR_CHARS:
        text = text[: _REPR_CHARS - 3] + "..."
    return f"{type(value).__name__} {text}"


def _fail(role: str, fn: Callable | str, value: Any) -> HandlerResultError:
    name = fn if isinstance(fn, str) else where(fn)
    return HandlerResultError(f"{name} returned {_what(value)}; expected {EXPECTED[role]}")


def _content_type(content_type: str | None, fn: Callable | str) -> str | None:
    """A handler's content type as the answer's header: None when empty; one that is no
    header value (a line break, a control or non-ASCII character) is a HandlerResultError."""
    if content_type and not _HEADER_VALUE.fullmatch(content_type):
        name = fn if isinstance(fn, str) else where(fn)
        raise HandlerResultError(
            f"{name} returned the content type {content_type[:_REPR_CHARS]!r}; expected "
            "printable ASCII (it is the answer's Content-Type header)"
        )
    return content_type or None


def as_bytes(value: Any) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return None


def chunk_bytes(chunk: Any) -> bytes:
    """A streamed answer's chunk as bytes; anything but a str or bytes-like is a
    HandlerResultError."""
    data = as_bytes(chunk)
    if data is None:
        raise HandlerResultError(
            f"a streamed chunk was {type(chunk).__name__}; expected str or bytes-like"
        )
    return data


def request_body(value: Any, fn: Callable | str) -> bytes:
    """An input_handler's result as the model server's request body (a file-like object read
    to its end, an iterator's chunks joined)."""
    body = as_bytes(value)
    if body is None:
        if callable(getattr(value, "read", None)):
            body = as_bytes(value.read())
        elif is_chunks(value):
            body = b"".join(chunk_bytes(chunk) for chunk in value)
    if body is None:
        raise _fail("input_handler", fn, value)
    return body


def is_chunks(value: Any) -> bool:
    """Whether a handler's body is an iterator of chunks (a streamed answer)."""
    return isinstance(value, Iterator)


def answer(value: Any, fn: Callable | str, role: str = "output_handler") -> tuple[Any, str | None]:
    """An output_handler's (or handler's) result as (body, content type or None); the body
    may be an iterator of chunks (a streamed answer, its chunks checked as they come)."""
    if is_chunks(value):
        return value, None
    if isinstance(value, tuple | list) and len(value) == 2:
        body, content_type = value
        if content_type is None or isinstance(content_type, str):
            if is_chunks(body):
                return body, _content_type(content_type, fn)
            if (data := as_bytes(body)) is not None:
                return data, _content_type(content_type, fn)
    raise _fail(role, fn, value)
