"""A TF Serving REST request body as the decoders build it: ModelRequest and the JSON pieces
(a parse that allows bare NaN/Infinity, a compact dump, `{"key": ...}` around encoded JSON)."""

from __future__ import annotations

import codecs
import json
import math
from dataclasses import dataclass
from typing import Any

import orjson

from sagemaker_serving.config.routing_rules import METHODS

__all__ = [
    "ModelRequest",
    "batch_key",
    "dumps",
    "json_key",
    "loads",
    "parse_int",
    "strip_bom",
    "wrap",
]


@dataclass
class ModelRequest:
    """A TF Serving REST request body and how many input records it holds (None: not per record)."""

    body: bytes
    records: int | None


_CONSTANTS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def loads(data: bytes | str) -> tuple[Any, bool]:
    """Parse JSON allowing bare NaN/Infinity/-Infinity: (value, whether such tokens occurred)."""
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        pass
    seen: list[str] = []

    def constant(token: str) -> float:
        seen.append(token)
        return _CONSTANTS[token]

    try:
        return json.loads(data, parse_constant=constant, parse_int=parse_int), bool(seen)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


MAX_INT_DIGITS = 4300  # Python's int() refuses longer digit strings (sys.int_info)


def parse_int(text: str) -> int | float:
    """A JSON or CSV integer; one too long for int() (any integer beyond 4300 digits is
    beyond a double, as the model server reads it too) is a float: infinity."""
    digits = len(text) - (text[:1] in "+-")
    return int(text) if digits <= MAX_INT_DIGITS else float(text)


def dumps(value: Any, nonfinite: bool = False) -> bytes:
    """Compact JSON; non-finite floats (when `nonfinite`) as bare NaN/Infinity tokens."""
    if not nonfinite:
        try:
            return orjson.dumps(value)
        except TypeError:  # e.g. integers beyond 64 bits
            pass
    text = json.dumps(value, allow_nan=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def json_key(name: str) -> bytes:
    """A JSON object key (a string), encoded."""
    return orjson.dumps(name)


def wrap(key: str, items: bytes) -> bytes:
    """`{"<key>": <items>}` around an already encoded JSON value."""
    return b'{"' + key.encode() + b'":' + items + b"}"


def batch_key(method: str) -> str:
    """The request key of a list of records: `examples` for classify/regress, else `instances`."""
    return METHODS.get(method, "instances")


def strip_bom(body: bytes) -> bytes:
    """The body without a leading UTF-8 byte order mark."""
    return body[3:] if body.startswith(codecs.BOM_UTF8) else body
