"""How the text of an environment variable becomes a setting's value.

Each function here returns a parser: it takes the variable's stripped, non-empty text and
returns the value, or raises `BadValue` saying what was expected (settings.py puts the
variable's name in front). A parser may return None for text that counts as unset.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from typing import Any

from sagemaker_serving.config.batch_parameters import CONTAINER_SPELLING, strategy_name
from sagemaker_serving.config.routing_rules import MODEL_NAME_PATTERN, MODEL_NAME_RULE

Parser = Callable[[str], Any]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_SECONDS = INT32_MAX // 1000  # seconds whose milliseconds still fit in an int32
_INTEGER = re.compile(r"[+-]?[0-9]+")
_PORT_RANGE = re.compile(r"([0-9]+)\s*-\s*([0-9]+)")


class BadValue(ValueError):
    """What a variable's text should have been, and what it was."""

    def __init__(self, expected: str, raw: str) -> None:
        super().__init__(f"expected {expected}, got {raw!r}")


def _expected_int(minimum: int, maximum: int, value: int | None) -> str:
    """What an integer variable accepts, phrased for the value that was given."""
    if maximum <= 65535:
        return f"an integer from {minimum} to {maximum}"
    kind = {0: "a non-negative integer", 1: "a positive integer"}[minimum]
    return f"{kind} no larger than {maximum}" if value is not None and value > maximum else kind


def integer(minimum: int, maximum: int) -> Parser:
    """A decimal integer (an optional sign, ASCII digits) from minimum to maximum."""

    def parse(raw: str) -> int:
        value = int(raw) if _INTEGER.fullmatch(raw) else None
        if value is None or not minimum <= value <= maximum:
            raise BadValue(_expected_int(minimum, maximum, value), raw)
        return value

    return parse


def boolean(raw: str) -> bool:
    """true or false, in any case."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise BadValue("true or false", raw)


def tf_boolean(raw: str) -> bool:
    """A boolean as TensorFlow reads it (0, 1, true, false; any case): TensorFlow aborts the
    process on anything else."""
    if raw.lower() in ("1", "true", "0", "false"):
        return raw.lower() in ("1", "true")
    raise BadValue("0, 1, true or false", raw)


def choice(choices: tuple[str, ...]) -> Parser:
    """One of `choices`, in any case (answered in lower case)."""

    def parse(raw: str) -> str:
        if raw.lower() in choices:
            return raw.lower()
        raise BadValue(f"one of {', '.join(choices)}", raw)

    return parse


def fraction(raw: str) -> float:
    """A number x with 0 <= x < 1."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:  # also rejects NaN
        raise BadValue("a number with 0 <= x < 1", raw)
    return value


def port_range(raw: str) -> tuple[int, int]:
    """`low-high`, inclusive ports with 1 <= low <= high <= 65535."""
    match = _PORT_RANGE.fullmatch(raw)
    if match is None:
        raise BadValue("'low-high' (for example '9000-9999')", raw)
    low, high = int(match[1]), int(match[2])
    if not 1 <= low <= high <= 65535:
        raise BadValue("ports 1 <= low <= high <= 65535", raw)
    return low, high


def model_name(raw: str) -> str | None:
    """A model name (routing_rules' rule); `None` counts as unset."""
    if raw == "None":
        return None
    if not MODEL_NAME_PATTERN.fullmatch(raw):
        raise BadValue(f"a model name ({MODEL_NAME_RULE})", raw)
    return raw


def container_strategy(raw: str) -> str:
    """MULTI_RECORD or SINGLE_RECORD, also spelled as the API does (MultiRecord)."""
    try:
        return CONTAINER_SPELLING[strategy_name(raw)]
    except ValueError:
        raise BadValue(" or ".join(CONTAINER_SPELLING.values()), raw) from None


def text(raw: str) -> str:
    """Any text (stripped)."""
    return raw


_FLAG = re.compile(r"--[a-z][a-z0-9_]*(=.*)?", re.DOTALL)


def flags(raw: str) -> tuple[str, ...]:
    """Command-line flags, shell-quoted where needed: each `--name=value` or `--name`."""
    try:
        items = shlex.split(raw)
    except ValueError as exc:
        raise BadValue(f"flags as a shell would split them ({exc})", raw) from None
    for item in items:
        if not _FLAG.fullmatch(item):
            raise BadValue("--name=value flags, separated by blanks", item)
    return tuple(items)
