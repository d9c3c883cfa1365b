"""rapidjson's Writer for strings, as TF Serving's REST API writes them (its escapes, its
indent), and the error for tensors it cannot write."""

from __future__ import annotations

import re


class TensorJsonError(ValueError):
    """Tensors TF Serving cannot write as JSON (its INVALID_ARGUMENT message)."""


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# ------------------------------------------------------------- rapidjson writer emulation

_STRING_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape_char(match: re.Match) -> str:
    char = match.group()
    return _STRING_ESCAPES.get(char) or f"\\u{ord(char):04X}"


def json_string(value: str | bytes) -> str:
    """rapidjson Writer::String(): escapes quote, backslash and control characters only."""
    if not isinstance(value, str):
        value = bytes(value).decode("utf-8", "surrogateescape")
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, value) + '"'


def indent(depth: int) -> str:
    return "    " * depth
