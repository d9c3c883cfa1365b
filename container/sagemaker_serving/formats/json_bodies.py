"""application/json and JSON Lines bodies as TF Serving REST requests.

A body that starts as a TF Serving request (a top-level `instances`, `inputs` or `examples`
key) passes through as it is, parsed or not: TF Serving names what is wrong with it. A JSON
list whose items are all lists is a list of instances, any other value one instance; an
application/json body of several values on separate lines is read as JSON Lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, TypeGuard

from sagemaker_serving.config.body_formats import REQUEST_KEYS
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request_body import (
    ModelRequest,
    batch_key,
    loads,
    strip_bom,
    wrap,
)

__all__ = ["decode_json", "decode_json_lines"]

TFS_REQUEST_START = re.compile(rf'\s*\{{\s*"(?:{"|".join(REQUEST_KEYS)})"\s*:'.encode())


def decode_json(body: bytes, method: str) -> ModelRequest:
    """An application/json body (BOM and surrounding white space ignored)."""
    body = strip_bom(body)
    text = body.strip()
    if not text:
        raise PayloadError("Empty request body: expected JSON", 400)
    try:
        value, _ = loads(text)
    except ValueError as err:
        if TFS_REQUEST_START.match(body[:64]):
            return ModelRequest(body, None)
        lines = text.splitlines()
        if sum(1 for line in lines if line.strip()) > 1:
            try:
                return _json_lines(lines, method)
            except PayloadError:
                pass
        raise PayloadError(f"Malformed JSON: {err}", 400) from None
    if _is_tfs_request(value):
        return ModelRequest(body, _batch_size(value))
    key = batch_key(method)
    if isinstance(value, list) and value and all(isinstance(item, list) for item in value):
        return ModelRequest(wrap(key, text), len(value))
    return ModelRequest(wrap(key, b"[" + text + b"]"), 1)


def decode_json_lines(body: bytes, method: str) -> ModelRequest:
    """A JSON Lines body: one instance per non-empty line."""
    return _json_lines(strip_bom(body).split(b"\n"), method)


def json_lines_groups(body: bytes, method: str, size: int) -> Iterator[ModelRequest]:
    """A JSON Lines body as requests of `size` instances each (the last of fewer), for an
    answer streamed as the model server makes it; a bad line raises PayloadError when its
    group is reached, numbered in the whole body."""
    items: list[bytes] = []
    for line, _ in _records(strip_bom(body).split(b"\n")):
        items.append(line)
        if len(items) == size:
            yield _batch(items, method)
            items = []
    if items:
        yield _batch(items, method)


def _records(lines: Iterable[bytes]) -> Iterator[tuple[bytes, Any]]:
    """The non-empty lines, stripped, with their values; a bad one raises PayloadError naming
    its number (from 1)."""
    for number, line in enumerate(lines, 1):
        if not (line := line.strip()):
            continue
        try:
            value, _ = loads(line)
        except ValueError as err:
            raise PayloadError(f"Malformed JSON Lines: line {number}: {err}", 400) from None
        yield line, value


def _batch(items: list[bytes], method: str) -> ModelRequest:
    """Encoded JSON values as one request's list of instances (or examples)."""
    return ModelRequest(wrap(batch_key(method), b"[" + b",".join(items) + b"]"), len(items))


def _is_tfs_request(value: Any) -> TypeGuard[dict]:
    return isinstance(value, dict) and any(key in value for key in REQUEST_KEYS)


def _batch_size(request: dict) -> int | None:
    batch = request.get("instances", request.get("examples"))
    return len(batch) if isinstance(batch, list) else None


def _json_lines(lines: Iterable[bytes], method: str) -> ModelRequest:
    """One instance per non-empty line. A single line holding a TF Serving request passes
    through."""
    items: list[bytes] = []
    first = None
    for line, value in _records(lines):
        first = value if not items else first
        items.append(line)
    if not items:
        raise PayloadError("Empty request body: expected JSON Lines", 400)
    if len(items) == 1 and _is_tfs_request(first):
        return ModelRequest(items[0], _batch_size(first))
    return _batch(items, method)
