"""TF Serving's JSON request reader: rapidjson's grammar with NaN/Infinity, its errors and offsets.

orjson parses ordinary bodies; the stdlib decoder takes NaN/Infinity and trailing bytes; what
both refuse goes through a port of rapidjson's Reader (kParseNanAndInfFlag,
kParseStopWhenDoneFlag), whose error text and byte offset TF Serving returns.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

import orjson

from tfs_model_server.errors import invalid_argument

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1
_INT64_TEXT = len(str(_INT64_MIN))  # longer integer texts are beyond int64 and uint64


class _ParseError(Exception):
    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


class _Reject(Exception):
    """A value the stdlib parser accepts but rapidjson does not."""


_WS = b" \t\n\r"
_ESCAPES = {
    ord('"'): b'"',
    ord("\\"): b"\\",
    ord("/"): b"/",
    ord("b"): b"\b",
    ord("f"): b"\f",
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
}
_PLAIN_RUN = re.compile(rb'[^"\\\x00-\x1f]+')
_DIGITS = re.compile(rb"[0-9]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _Reader:
    """rapidjson's Reader with kParseNanAndInfFlag: same grammar, errors and offsets."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def peek(self, at: int | None = None) -> int:
        at = self.pos if at is None else at
        return self.data[at] if at < len(self.data) else 0  # NUL ends the stream

    def consume(self, char: int) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def skip_ws(self) -> None:
        while self.peek() in _WS:
            self.pos += 1

    def fail(self, reason: str, offset: int | None = None) -> NoReturn:
        raise _ParseError(reason, self.pos if offset is None else offset)

    def document(self) -> Any:
        for bom in (0xEF, 0xBB, 0xBF):  # EncodedInputStream<UTF8, MemoryStream> skips a BOM
            self.consume(bom)
        self.skip_ws()
        if not self.peek():
            self.fail("The document is empty.")
        return self.value()  # kParseStopWhenDoneFlag: trailing bytes are ignored

    def value(self) -> Any:
        stack: list[list | dict] = []
        keys: list[str | None] = []
        while True:
            char = self.peek()
            if char == ord("{"):
                self.pos += 1
                self.skip_ws()
                if not self.consume(ord("}")):
                    stack.append({})
                    keys.append(self.member_name())
                    continue
                value: Any = {}
            elif char == ord("["):
                self.pos += 1
                self.skip_ws()
                if not self.consume(ord("]")):
                    stack.append([])
                    keys.append(None)
                    continue
                value = []
            else:
                value = self.scalar(char)
            while True:  # attach the finished value to its containers
                if not stack:
                    return value
                top = stack[-1]
                self.skip_ws()
                if isinstance(top, list):
                    top.append(value)
                    if self.consume(ord(",")):
                        self.skip_ws()
                        break
                    if not self.consume(ord("]")):
                        self.fail("Missing a comma or ']' after an array element.")
                else:
                    top[keys[-1]] = value
                    if self.consume(ord(",")):
                        self.skip_ws()
                        keys[-1] = self.member_name()
                        break
                    if not self.consume(ord("}")):
                        self.fail("Missing a comma or '}' after an object member.")
                value = stack.pop()
                keys.pop()

    def member_name(self) -> str:
        if self.peek() != ord('"'):
            self.fail("Missing a name for object member.")
        name = self.string()
        self.skip_ws()
        if not self.consume(ord(":")):
            self.fail("Missing a colon after a name of object member.")
        self.skip_ws()
        return name

    def scalar(self, char: int) -> Any:
        if char == ord('"'):
            return self.string()
        for word, result in ((b"null", None), (b"true", True), (b"false", False)):
            if char == word[0]:
                self.pos += 1
                for expected in word[1:]:
                    if not self.consume(expected):
                        self.fail("Invalid value.")
                return result
        return self.number()

    def hex4(self, escape_at: int) -> int:
        digits = self.data[self.pos : self.pos + 4]
        if len(digits) < 4 or not _HEX.issuperset(digits):
            self.fail("Incorrect hex digit after \\u escape in string.", escape_at)
        self.pos += 4
        return int(digits, 16)

    def string(self) -> str:
        self.pos += 1
        out = bytearray()
        while True:
            char = self.peek()
            if char == ord("\\"):
                escape_at = self.pos
                self.pos += 1
                code = self.peek()
                if code in _ESCAPES:
                    out += _ESCAPES[code]
                    self.pos += 1
                elif code == ord("u"):
                    self.pos += 1
                    out += chr(self.code_point(escape_at)).encode("utf-8")
                else:
                    self.fail("Invalid escape character in string.", escape_at)
            elif char == ord('"'):
                self.pos += 1
                return out.decode("utf-8", "surrogateescape")
            elif char < 0x20:
                self.fail(
                    "Missing a closing quotation mark in string."
                    if char == 0
                    else "Invalid encoding in string."
                )
            else:
                run = _PLAIN_RUN.match(self.data, self.pos)
                assert run is not None  # char is neither a quote, a backslash nor a control
                out += run.group()
                self.pos = run.end()

    def code_point(self, escape_at: int) -> int:
        point = self.hex4(escape_at)
        if 0xD800 <= point <= 0xDBFF:
            if not (self.consume(ord("\\")) and self.consume(ord("u"))):
                self.fail("The surrogate pair in string is invalid.", escape_at)
            low = self.hex4(escape_at)
            if not 0xDC00 <= low <= 0xDFFF:
                self.fail("The surrogate pair in string is invalid.", escape_at)
            return 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)
        if 0xDC00 <= point <= 0xDFFF:
            self.fail("The surrogate pair in string is invalid.", escape_at)
        return point

    def digits(self) -> bytes:
        match = _DIGITS.match(self.data, self.pos)
        assert match is not None  # [0-9]* matches everywhere
        run = match.group()
        self.pos += len(run)
        return run

    def number(self) -> int | float:
        start = self.pos
        minus = self.consume(ord("-"))
        char = self.peek()
        if char == ord("0"):
            self.pos += 1
        elif ord("1") <= char <= ord("9"):
            self.digits()
        elif char in (ord("N"), ord("I")):
            return self.nan_or_inf(minus)
        else:
            self.fail("Invalid value.")
        fraction = b""
        exponent = False
        if self.consume(ord(".")):
            fraction = self.digits()
            if not fraction:
                self.fail("Miss fraction part in number.")
        if self.consume(ord("e")) or self.consume(ord("E")):
            exponent = True
            negative = self.peek() == ord("-")
            self.consume(ord("+")) or self.consume(ord("-"))
            power = self.digits()
            if not power:
                self.fail("Miss exponent in number.")
            if not negative and _too_big(power, 308 + len(fraction)):
                self.fail("Number too big to be stored in double.", start)
        text = self.data[start : self.pos]
        if not fraction and not exponent and len(text) <= _INT64_TEXT:
            integer = int(text)
            if _INT64_MIN <= integer <= _UINT64_MAX:
                return integer
        value = float(text)  # no digit limit, unlike int(): any longer integer is a double
        if math.isinf(value):
            self.fail("Number too big to be stored in double.", start)
        return value

    def nan_or_inf(self, minus: bool) -> float:
        if self.consume(ord("N")):
            if self.consume(ord("a")) and self.consume(ord("N")):
                return math.nan
        elif self.consume(ord("I")) and self.consume(ord("n")) and self.consume(ord("f")):
            if self.peek() == ord("i") and not all(self.consume(c) for c in b"inity"):
                self.fail("Invalid value.")
            return -math.inf if minus else math.inf
        self.fail("Invalid value.")


def _too_big(digits: bytes, limit: int) -> bool:
    """Whether the decimal `digits` (leading zeros allowed, any length) exceed `limit`."""
    significant = digits.lstrip(b"0")
    return len(significant) > len(str(limit)) or int(significant or b"0") > limit


def _parse_int(text: str) -> int | float:
    """An integer beyond int64/uint64 as a double, as rapidjson reads it; one too big for a
    double is refused (the reader names it)."""
    if len(text) <= _INT64_TEXT:
        value = int(text)
        if _INT64_MIN <= value <= _UINT64_MAX:
            return value
    number = float(text)  # no digit limit, unlike int()
    if math.isinf(number):
        raise _Reject
    return number


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Reject
    return value


_STDLIB = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float)


def _stdlib_loads(data: bytes) -> tuple[bool, Any]:
    """Fast fallback for NaN/Infinity and trailing bytes: (ok, value)."""
    start = len(data) - len(data.lstrip(_WS))
    if (
        data[start : start + 1] not in (b"{", b"[")
        or b"\x00" in data
        or (b"\\u" in data and _SURROGATE_ESCAPE.search(data))
    ):
        return False, None
    try:
        text = data.decode("utf-8")
        value, _ = _STDLIB.raw_decode(text, start)  # trailing bytes are ignored
    except (ValueError, RecursionError, _Reject):
        return False, None
    return True, value


def loads(body: bytes | str) -> Any:
    """Parse a request body as TF Serving does (rapidjson, NaN/Infinity allowed)."""
    data = body.encode("utf-8", "surrogateescape") if isinstance(body, str) else bytes(body)
    if not data:
        raise invalid_argument("JSON Parse error: The document is empty")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    ok, value = _stdlib_loads(data)
    if ok:
        return value
    try:
        return _Reader(data).document()
    except _ParseError as err:
        raise invalid_argument(f"JSON Parse error: {err.reason} at offset: {err.offset}") from None
