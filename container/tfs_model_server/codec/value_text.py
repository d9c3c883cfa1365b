"""JSON values as TF Serving prints them in its error messages (JsonValueToDebugString,
JsonTypeString).

TF Serving writes the offending value with rapidjson's PrettyWriter; this emulates that writer
(Grisu shortest doubles, four-space indent, arrays on one line, a stop at the first
NaN/Infinity) and the 256-byte limit TF Serving puts on it. Unlike TF Serving, a single
string longer than that limit is cut too (TF Serving would echo a 4 MiB string whole).
"""

from __future__ import annotations

import math
from typing import Any

from tfs_rest_json import indent as _indent
from tfs_rest_json import json_string as _json_string


def _rapidjson_double(value: float) -> str:
    """rapidjson Writer::Double() (Grisu shortest digits, Prettify() layout)."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    power = (int(exp) if exp else 0) - len(frac)
    stripped = digits.rstrip("0")
    power += len(digits) - len(stripped)
    digits, length = stripped, len(stripped)
    top = length + power
    if power >= 0 and top <= 21:
        text = digits + "0" * power + ".0"
    elif 0 < top <= 21:
        text = digits[:top] + "." + digits[top:]
    elif -6 < top <= 0:
        text = "0." + "0" * -top + digits
    elif length == 1:
        text = f"{digits}e{top - 1}"
    else:
        text = f"{digits[0]}.{digits[1:]}e{top - 1}"
    return sign + text


_DEBUG_STRING_BYTES = 256  # kMaxJsonDebugStringBytes


class _Stop(Exception):
    """The writer refused a value (NaN/Infinity) or the text reached its limit."""


class _DebugWriter:
    """JsonValueToDebugString(): rapidjson's PrettyWriter with kFormatSingleLineArray behind
    JsonWriterWithLimit, which starts no writer call once the text has 256 bytes."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.levels: list[list] = []  # [in_array, value_count] of each open container

    def _write(self, text: str) -> None:
        if len(text) > _DEBUG_STRING_BYTES:  # one long string: TF writes it whole, we cut it
            text = text[:_DEBUG_STRING_BYTES] + "..."
        self.parts.append(text)
        self.size += len(text.encode("utf-8", "surrogateescape"))

    def _call(self) -> None:
        """JsonWriterWithLimit::InLimit()."""
        if self.size >= _DEBUG_STRING_BYTES:
            raise _Stop

    def _prefix(self) -> None:
        """PrettyWriter::PrettyPrefix(): separators before a value or key."""
        self._call()
        if not self.levels:
            return
        level = self.levels[-1]
        in_array, count = level
        if in_array:
            self._write(", " if count else "")
        elif count % 2:
            self._write(": ")
        else:
            self._write((",\n" if count else "\n") + _indent(len(self.levels)))
        level[1] += 1

    def _end(self, closer: str) -> None:
        self._call()
        in_array, count = self.levels.pop()
        if count and not in_array:
            self._write("\n" + _indent(len(self.levels)))
        self._write(closer)

    def value(self, value: Any) -> None:
        """rapidjson Value::Accept()."""
        self._prefix()
        if isinstance(value, dict):
            self._write("{")
            self.levels.append([False, 0])
            for key, item in value.items():
                self._prefix()
                self._write(_json_string(key))
                self.value(item)
            self._end("}")
        elif isinstance(value, list):
            self._write("[")
            self.levels.append([True, 0])
            for item in value:
                self.value(item)
            self._end("]")
        else:
            self._write(_scalar_text(value))

    def text(self) -> str:
        return "".join(self.parts)


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Stop  # Writer::WriteDouble() refuses NaN/Infinity
        return _rapidjson_double(value)
    return _json_string(value)


def value_to_string(value: Any) -> str:
    """JsonValueToDebugString(): a JSON value as TF Serving quotes it in error messages."""
    writer = _DebugWriter()
    try:
        writer.value(value)
    except _Stop:
        pass
    return writer.text()


def json_type(value: Any) -> str:
    """JsonTypeString()."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"
