"""JSON values as TF Serving prints them in its error messages (JsonValueToString, JsonTypeString).

TF Serving writes the offending value with rapidjson's PrettyWriter; this emulates that writer
(Grisu shortest doubles, four-space indent, a stop at the first NaN/Infinity in a container).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tfs_rest_json import decimal as _decimal
from tfs_rest_json import indent as _indent
from tfs_rest_json import json_string as _json_string

_FLOAT_LIMIT = 3.4028234e38  # rapidjson Value::IsFloat() bounds


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


class _Abort(Exception):
    """rapidjson's writer refuses NaN/Infinity inside containers and stops."""


def _pretty(value: Any, depth: int, out: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("\n" if i == 0 else ",\n") + _indent(depth + 1) + _json_string(key) + ": ")
            _pretty(item, depth + 1, out)
        out.append("\n" + _indent(depth) + "}")
    elif isinstance(value, list):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(value):
            out.append(("\n" if i == 0 else ",\n") + _indent(depth + 1))
            _pretty(item, depth + 1, out)
        out.append("\n" + _indent(depth) + "]")
    else:
        out.append(_scalar_text(value))


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Abort
        return _rapidjson_double(value)
    return _json_string(value)


def value_to_string(value: Any) -> str:
    """JsonValueToString(): a JSON value as TF Serving prints it in error messages."""
    if isinstance(value, float):
        if -_FLOAT_LIMIT <= value <= _FLOAT_LIMIT:
            return _decimal(float(np.float32(value)), True)
        return _decimal(value, False)
    out: list[str] = []
    try:
        _pretty(value, 0, out)
    except _Abort:
        pass
    except RecursionError:
        return "<nested too deeply>"
    return "".join(out)


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
