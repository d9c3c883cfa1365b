"""TF Serving's REST JSON codec.

A Python port of tensorflow_serving/util/json_tensor.cc (request parsing, tensor
conversion, response writing), of MakeJsonFromStatus and of the proto JSON printing behind
the status and metadata endpoints (model_servers/http_rest_api_util.cc ToJsonString()).
Error messages keep TF Serving's text.

Interface: loads(body) -> doc, predict_signature_name(doc), predict_inputs(doc, specs)
-> ({alias: ndarray}, row_format), classify_regress_request(doc, verb) -> (signature,
serialized Examples, serialized context or None); and, returning the response body bytes,
predict_response(outputs, row_format), classify_response(results), regress_response(values),
error_body(message), status_json(GetModelStatusResponse) and
metadata_json(GetModelMetadataResponse).

Maps in TF Serving are protobuf maps with no defined order; where that order shows
(which input is checked first, the order of outputs) names are taken in sorted order.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import orjson
from google.protobuf import descriptor
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from tfs_model_server.core.errors import ServingError, internal, invalid_argument, unimplemented
from tfs_model_server.core.tensor_spec import DTYPE_NAMES, TensorSpec
from tfs_rest_json import TensorJsonError
from tfs_rest_json import decimal as _decimal
from tfs_rest_json import float32_joined as _float32_joined
from tfs_rest_json import indent as _indent
from tfs_rest_json import json_string as _json_string
from tfs_rest_json import predict_response as _predict_response
from tfs_rest_json import utf8 as _utf8

DEFAULT_SIGNATURE = "serving_default"

_FLT_MAX = float(np.finfo(np.float32).max)
_FLOAT_LIMIT = 3.4028234e38  # rapidjson Value::IsFloat() bounds
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_MAX_EXACT_INT = {types_pb2.DT_FLOAT: 2**24 - 1, types_pb2.DT_DOUBLE: 2**53 - 1}

_NP_DTYPES: dict[int, Any] = {
    types_pb2.DT_FLOAT: np.float32,
    types_pb2.DT_DOUBLE: np.float64,
    types_pb2.DT_INT32: np.int32,
    types_pb2.DT_INT16: np.int16,
    types_pb2.DT_INT8: np.int8,
    types_pb2.DT_UINT8: np.uint8,
    types_pb2.DT_INT64: np.int64,
    types_pb2.DT_UINT32: np.uint32,
    types_pb2.DT_UINT64: np.uint64,
    types_pb2.DT_BOOL: np.bool_,
    types_pb2.DT_STRING: object,
}
_SMALL_INTS = {types_pb2.DT_INT32, types_pb2.DT_INT16, types_pb2.DT_INT8, types_pb2.DT_UINT8}
_DECIMALS = {types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE}


def _dtype_name(dtype: int) -> str:
    """TF's DataTypeString()."""
    if dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype]
    try:
        return types_pb2.DataType.Name(dtype)[3:].lower()
    except ValueError:
        return f"unknown dtype enum ({dtype})"


def _status_text(err: ServingError) -> str:
    """absl::Status::ToString() of an error."""
    return f"{err.code.name}: {err.message}"


# --------------------------------------------------------------------------- parsing


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

    def fail(self, reason: str, offset: int | None = None):
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
        run = _DIGITS.match(self.data, self.pos).group()
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
            if not negative and int(power) > 308 + len(fraction):
                self.fail("Number too big to be stored in double.", start)
        text = self.data[start : self.pos]
        if not fraction and not exponent:
            integer = int(text)
            if _INT64[0] <= integer <= _UINT64_MAX:
                return integer
        value = float(text)
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


def _parse_int(text: str) -> int | float:
    value = int(text)
    return value if _INT64[0] <= value <= _UINT64_MAX else float(text)


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


# ------------------------------------------------------------- rapidjson writer emulation


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


def _value_to_string(value: Any) -> str:
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


def _json_type(value: Any) -> str:
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


# ------------------------------------------------------------------- request: common


def _format_error(value: Any, text: str) -> ServingError:
    return invalid_argument(f"JSON Value: {_value_to_string(value)} {text}")


def _request_object(doc: Any) -> dict:
    """ParseJson()'s top-level check and FillSignature()'s type check."""
    if not isinstance(doc, dict):
        raise _format_error(doc, "Is not object")
    if "signature_name" in doc and not isinstance(doc["signature_name"], str):
        raise _format_error(
            doc, "not formatted correctly. 'signature_name' key must be a string value."
        )
    return doc


def predict_signature_name(doc: Any) -> str:
    """The request's signature_name ('serving_default' when absent or empty)."""
    return _request_object(doc).get("signature_name") or DEFAULT_SIGNATURE


def _is_b64_object(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _b64decode(text: str) -> bytes | None:
    """absl::Base64Unescape(): whitespace ignored, padding optional ('=' or '.')."""
    data = re.sub(r"[ \t\n\v\f\r]", "", text)
    body = data.rstrip("=.")
    pad = len(data) - len(body)
    if not body.isascii() or re.search(r"[^A-Za-z0-9+/]", body) or len(body) % 4 == 1:
        return None
    if pad and pad != (-len(body)) % 4:
        return None
    try:
        return binascii.a2b_base64(body + "=" * ((-len(body)) % 4))
    except binascii.Error:
        return None


def _decode_b64_object(value: Any) -> bytes:
    """JsonDecodeBase64Object()."""
    if not _is_b64_object(value):
        raise invalid_argument(
            f"JSON Value: {_value_to_string(value)} not formatted correctly for base64 data"
        )
    decoded = _b64decode(value["b64"])
    if decoded is None:
        raise invalid_argument("Unable to base64 decode")
    return decoded


# ------------------------------------------------------------- request: tensor values


def _type_error(value: Any, dtype: int) -> ServingError:
    return invalid_argument(
        f"JSON Value: {_value_to_string(value)} Type: {_json_type(value)} "
        f"is not of expected type: {_dtype_name(dtype)}"
    )


def _is_lossless(value: int | float, dtype: int) -> bool:
    """IsLosslessDecimal<float|double>()."""
    if isinstance(value, int):
        return abs(value) <= _MAX_EXACT_INT[dtype]
    if not math.isfinite(value) or dtype == types_pb2.DT_DOUBLE:
        return True
    return -_FLT_MAX <= value <= _FLT_MAX


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _tensor_value(value: Any, dtype: int) -> Any:
    """AddValueToTensor(): one JSON leaf as a value of `dtype`."""
    if dtype in _DECIMALS:
        if type(value) not in (int, float):
            raise _type_error(value, dtype)
        if not _is_lossless(value, dtype):
            target = "float" if dtype == types_pb2.DT_FLOAT else "double"
            raise invalid_argument(
                f"Cannot convert JSON value: {_value_to_string(value)} "
                f"to {target} without loss of precision."
            )
        return value
    if dtype not in _NP_DTYPES:
        raise unimplemented(
            f"Conversion of JSON Value: {_value_to_string(value)} to type: {_dtype_name(dtype)}"
        )
    if not _accepts(value, dtype):
        raise _type_error(value, dtype)
    return _utf8(value) if dtype == types_pb2.DT_STRING else value


def _accepts(value: Any, dtype: int) -> bool:
    """rapidjson's IsInt/IsInt64/IsUint/IsUint64/IsBool/IsString for `dtype`."""
    if dtype in _SMALL_INTS:
        return _int_in(value, *_INT32)
    if dtype == types_pb2.DT_INT64:
        return _int_in(value, *_INT64)
    if dtype == types_pb2.DT_UINT32:
        return _int_in(value, 0, _UINT32_MAX)
    if dtype == types_pb2.DT_UINT64:
        return _int_in(value, 0, _UINT64_MAX)
    if dtype == types_pb2.DT_BOOL:
        return isinstance(value, bool)
    return isinstance(value, str)


def _leaf(value: Any, dtype: int) -> Any:
    if isinstance(value, dict):
        if dtype == types_pb2.DT_STRING:
            return _decode_b64_object(value)
        raise _type_error(value, dtype)
    return _tensor_value(value, dtype)


def _dense_shape(value: Any) -> list[int]:
    """GetDenseTensorShape(): sizes along the first element of each nested list."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value: Any, level: int, shape: list[int], dtype: int, out: list) -> None:
    """FillTensorProto(): check the nesting against `shape` and collect leaves."""
    rank = len(shape)
    if not isinstance(value, list):
        if level != rank:
            raise invalid_argument(
                f"JSON Value: {_value_to_string(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {rank}"
            )
        out.append(_leaf(value, dtype))
        return
    if level >= rank:
        raise invalid_argument(f"Encountered list at unexpected level: {level} expected < {rank}")
    if len(value) != shape[level]:
        raise invalid_argument(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}"
        )
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def _np_dtype(dtype: int) -> Any:
    if dtype in _NP_DTYPES:
        return _NP_DTYPES[dtype]
    try:
        import tensorflow as tf

        return tf.dtypes.as_dtype(dtype).as_numpy_dtype
    except (TypeError, ValueError):
        return object


def _make_array(values: list, shape: Sequence[int], dtype: int) -> np.ndarray:
    """Values already checked by _tensor_value() as an ndarray of `dtype`."""
    np_dtype = _np_dtype(dtype)
    if np_dtype is object:
        array = np.empty(len(values), dtype=object)
        array[:] = values
    elif dtype in _SMALL_INTS:  # TF copies int_val (int32) into the narrower type
        array = np.array(values, dtype=np.int64).astype(np_dtype)
    else:
        array = np.array(values, dtype=np_dtype)
    return array.reshape(shape)


def _exact_tensor(value: Any, dtype: int) -> tuple[list, list[int]]:
    shape = _dense_shape(value)
    values: list = []
    _fill(value, 0, shape, dtype, values)
    return values, shape


def _flatten(value: Any) -> tuple[list, list[int]] | None:
    """Leaves and shape of a rectangular nested list, or None."""
    shape = _dense_shape(value)
    items = [value]
    for size in shape:
        if set(map(type, items)) != {list} or set(map(len, items)) != {size}:
            return None
        items = list(chain.from_iterable(items))
    return items, shape


def _fast_tensor(value: Any, dtype: int) -> np.ndarray | None:
    """Vectorised conversion of well-formed input; None when the exact walk must decide."""
    flat_shape = _flatten(value)
    if flat_shape is None:
        return None
    flat, shape = flat_shape
    types = set(map(type, flat))
    try:
        if dtype == types_pb2.DT_BOOL:
            return np.array(flat, dtype=np.bool_).reshape(shape) if types <= {bool} else None
        if dtype == types_pb2.DT_STRING:
            if not types <= {str}:
                return None
            return _make_array([_utf8(s) for s in flat], shape, dtype)
        if dtype in _DECIMALS:
            return _fast_decimal(flat, shape, types, dtype)
        if not types <= {int}:
            return None
        if dtype == types_pb2.DT_UINT64:
            return np.array(flat, dtype=np.uint64).reshape(shape)
        array = np.array(flat, dtype=np.int64)
        low, high = {types_pb2.DT_INT64: _INT64, types_pb2.DT_UINT32: (0, _UINT32_MAX)}.get(
            dtype, _INT32
        )
        if array.size and (array.min() < low or array.max() > high):
            return None
        return array.astype(_NP_DTYPES[dtype]).reshape(shape)
    except OverflowError:
        return None


def _fast_decimal(flat: list, shape: list[int], types: set, dtype: int) -> np.ndarray | None:
    if not types <= {int, float}:
        return None
    array = np.array(flat, dtype=np.float64)
    if int in types and array.size:
        finite = array[np.isfinite(array)] if float in types else array
        if finite.size and np.abs(finite).max() > _MAX_EXACT_INT[dtype]:
            return None
    if (
        float in types
        and dtype == types_pb2.DT_FLOAT
        and (np.count_nonzero(np.abs(array) > _FLT_MAX) != np.count_nonzero(np.isinf(array)))
    ):
        return None
    return array.astype(_NP_DTYPES[dtype]).reshape(shape)


def _tensor(value: Any, dtype: int) -> np.ndarray:
    """One JSON value (list nesting of leaves) as a tensor of `dtype`."""
    array = _fast_tensor(value, dtype) if dtype in _NP_DTYPES else None
    if array is None:
        values, shape = _exact_tensor(value, dtype)
        array = _make_array(values, shape, dtype)
    return array


# ------------------------------------------------------------- request: predict layouts


def _is_element_object(value: Any) -> bool:
    return isinstance(value, dict) and not _is_b64_object(value)


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


class _Batch:
    """Per-input leaves and first-instance shape while walking 'instances' (AddInstanceItem)."""

    def __init__(self, specs: Mapping[str, TensorSpec]) -> None:
        self.specs = specs
        self.values: dict[str, list] = {}
        self.shapes: dict[str, tuple[int, list[int]]] = {}

    def add(self, item: Any, name: str) -> None:
        if name not in self.specs:
            raise invalid_argument(f"JSON object: does not have named input: {name}")
        values, shape = _exact_tensor(item, self.specs[name].dtype)
        if name not in self.shapes:
            self.shapes[name] = (len(values), shape)
            self.values[name] = values
            return
        size, first = self.shapes[name]
        if size != len(values):
            raise invalid_argument(f"Expecting tensor size: {size} but got: {len(values)}")
        if first != shape:
            raise invalid_argument(
                f"Expecting shape {_shape_text(first)} but got: {_shape_text(shape)}"
            )
        self.values[name].extend(values)

    def arrays(self, count: int) -> dict[str, np.ndarray]:
        return {
            name: _make_array(values, [count, *self.shapes[name][1]], self.specs[name].dtype)
            for name, values in self.values.items()
        }


def _exact_instances(
    instances: list, specs: Mapping[str, TensorSpec], objects: bool
) -> dict[str, np.ndarray]:
    """FillTensorMapFromInstancesList(), element by element, with TF Serving's errors."""
    batch = _Batch(specs)
    names = sorted(specs)
    for index, element in enumerate(instances):
        if objects:
            if not _is_element_object(element):
                raise invalid_argument(
                    f"Expecting object but got list at item {index} of input list"
                )
            for name, item in element.items():
                try:
                    batch.add(item, name)
                except ServingError as err:
                    raise invalid_argument(
                        f"Failed to process element: {index} key: {name} of 'instances' list. "
                        f"Error: {_status_text(err)}"
                    ) from None
            if set(element) != set(names):
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{_value_to_string(element)} must only have keys: {','.join(names)}"
                )
        else:
            if _is_element_object(element):
                raise invalid_argument(
                    f"Expecting value/list but got object at item {index} of input list"
                )
            try:
                batch.add(element, names[0])
            except ServingError as err:
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. "
                    f"Error: {_status_text(err)}"
                ) from None
    return batch.arrays(len(instances))


def _fast_instances(
    instances: list, specs: Mapping[str, TensorSpec], objects: bool
) -> dict[str, np.ndarray] | None:
    names = sorted(specs)
    if not objects:
        array = _fast_tensor(instances, specs[names[0]].dtype)
        return None if array is None else {names[0]: array}
    if "b64" in specs or set(map(type, instances)) != {dict}:
        return None
    if any(element.keys() != specs.keys() for element in instances):
        return None
    arrays = {}
    for name in names:
        array = _fast_tensor([element[name] for element in instances], specs[name].dtype)
        if array is None:
            return None
        arrays[name] = array
    return arrays


def _from_instances(instances: list, specs: Mapping[str, TensorSpec]) -> dict[str, np.ndarray]:
    first = instances[0]
    if not isinstance(first, dict) and len(specs) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    objects = _is_element_object(first)
    arrays = _fast_instances(instances, specs, objects)
    return arrays if arrays is not None else _exact_instances(instances, specs, objects)


def _from_inputs(value: Any, specs: Mapping[str, TensorSpec]) -> dict[str, np.ndarray]:
    """FillTensorMapFromInputsMap()."""
    names = sorted(specs)
    if not isinstance(value, dict) or _is_b64_object(value):
        if len(specs) > 1:
            raise invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map"
            )
        return {names[0]: _tensor(value, specs[names[0]].dtype)}
    arrays = {}
    for name in names:
        if name not in value:
            raise invalid_argument(f"Missing named input: {name} in 'inputs' object.")
        arrays[name] = _tensor(value[name], specs[name].dtype)
    return arrays


def predict_inputs(
    doc: dict, specs: Mapping[str, TensorSpec]
) -> tuple[dict[str, np.ndarray], bool]:
    """FillPredictRequestFromJson(): ({alias: ndarray}, row_format)."""
    _request_object(doc)
    if not specs:
        raise invalid_argument(
            f"Failed to get input map for signature: {doc.get('signature_name') or 'DEFAULT'}"
        )
    try:
        if "instances" in doc:
            if "inputs" in doc:
                raise _format_error(
                    doc,
                    "Not formatted correctly expecting only one of "
                    "'inputs' or 'instances' keys to exist ",
                )
            instances = doc["instances"]
            if not isinstance(instances, list):
                raise _format_error(doc, "Excepting 'instances' to be an list/array")
            if not instances:
                raise _format_error(doc, "No values in 'instances' array")
            return _from_instances(instances, specs), True
        if "inputs" in doc:
            return _from_inputs(doc["inputs"], specs), False
    except RecursionError:
        raise invalid_argument("JSON value is nested too deeply") from None
    raise invalid_argument("Missing 'inputs' or 'instances' key")


# ---------------------------------------------------------- request: classify / regress


def _feature_value(value: Any, name: str) -> tuple[str, Any]:
    """AddValueToFeature() without the kind check: (kind, value)."""
    if (
        value is None
        or isinstance(value, list)
        or (isinstance(value, dict) and not _is_b64_object(value))
    ):
        raise invalid_argument(
            f"Feature: {name} has element with unexpected JSON type: {_json_type(value)}"
        )
    if isinstance(value, bool):
        return "int64", int(value)
    if isinstance(value, dict):
        return "bytes", value
    if isinstance(value, str):
        return "bytes", _utf8(value)
    if isinstance(value, float):
        return "float", value
    return "int64", value


def _checked_feature_value(kind: str, value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return _decode_b64_object(value)
    if kind == "float" and not _is_lossless(value, types_pb2.DT_FLOAT):
        raise invalid_argument(
            f"Cannot convert JSON value: {_value_to_string(value)} "
            "to float without loss of precision."
        )
    if kind == "int64" and value > _INT64[1]:
        raise invalid_argument(f"Feature: {name} has uint64 element. Only int64 is supported.")
    return value


def _feature(content: Any, name: str) -> feature_pb2.Feature:
    feature = feature_pb2.Feature()
    kind, values = None, []
    for item in content if isinstance(content, list) else [content]:
        item_kind, value = _feature_value(item, name)
        if kind is not None and item_kind != kind:
            raise invalid_argument(
                f"Unexpected element type in feature: {name} expecting type: {kind}"
            )
        kind = item_kind
        values.append(_checked_feature_value(kind, value, name))
    if kind is not None:
        getattr(feature, f"{kind}_list").value.extend(values)
    return feature


def _example(value: Any) -> bytes:
    """MakeExampleFromJsonObject(), serialized."""
    if not isinstance(value, dict):
        raise invalid_argument(f"Example must be JSON object but got JSON {_json_type(value)}")
    example = example_pb2.Example()
    features = example.features.feature
    for name, content in value.items():
        features[name].CopyFrom(_feature(content, name))
    return example.SerializeToString(deterministic=True)


def classify_regress_request(
    doc: Any, verb: str = "classify"
) -> tuple[str, list[bytes], bytes | None]:
    """FillClassifyRegressRequestFromJson(): (signature, serialized Examples, context).

    `verb` ('classify' or 'regress') changes nothing: TF Serving parses both requests with
    the same code, whose missing-'examples' message says "classify" for regress too.
    """
    del verb
    signature = predict_signature_name(doc)
    context = _example(doc["context"]) if "context" in doc else None
    if "examples" not in doc:
        raise _format_error(
            doc, "When method is classify, key 'examples' is expected and was not found"
        )
    examples = doc["examples"]
    if not isinstance(examples, list):
        raise _format_error(doc, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise _format_error(doc, "'examples' value is an empty array")
    return signature, [_example(example) for example in examples], context


# ------------------------------------------------------------------------- responses
#
# The predict layout and the number text live in tfs_rest_json (shared with the SageMaker
# service's gRPC tensor path, which has to write the same bytes).


def predict_response(outputs: Mapping[str, np.ndarray], row_format: bool) -> bytes:
    """MakeJsonFromTensors(): {"predictions": ...} (row) or {"outputs": ...} (columnar)."""
    try:
        return _predict_response(outputs, row_format)
    except TensorJsonError as err:
        raise invalid_argument(str(err)) from None


def classify_response(results: Sequence[Sequence[tuple[bytes | str, float]]]) -> bytes:
    """MakeJsonFromClassificationResult(): {"results": [[[label, score], ...], ...]}."""
    if not results:
        raise invalid_argument("Cannot convert empty ClassificationResults to JSON")
    rows = [
        "["
        + ", ".join(
            f"[{_json_string(label)}, {_decimal(float(np.float32(score)), True)}]"
            for label, score in classes
        )
        + "]"
        for classes in results
    ]
    return _utf8('{\n    "results": [' + ", ".join(rows) + "\n    ]\n}")


def regress_response(values: Sequence[float]) -> bytes:
    """MakeJsonFromRegressionResult(): {"results": [v1, v2, ...]}."""
    if not len(values):
        raise invalid_argument("Cannot convert empty RegressionResults to JSON")
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    return _utf8('{\n    "results": [' + _float32_joined(flat, flat.size, ", ")[0] + "]\n}")


def error_body(message: str) -> bytes:
    """MakeJsonFromStatus(): {"error": message}."""
    return _utf8('{\n    "error": ' + _json_string(message) + "\n}")


# ---------------------------------------------------------------------- proto to JSON
#
# TF Serving prints protos with protobuf's pre-v22 C++ JSON printer (MessageToJsonString,
# add_whitespace, always_print_primitive_fields): JsonObjectWriter's layout (one space of
# indent per level, a newline after the root) and DefaultValueObjectWriter's field order.
# That writer lays out, in declaration order, every field that is not a oneof primitive:
# defaults for primitives, [] / {} for repeated fields and maps, set messages in place
# (unset ones are skipped). Values it then receives as primitives and has no primitive
# slot for go last, in field number order: set oneof primitives and wrapper messages
# (google.protobuf.Int64Value ...), which are printed as their bare value.

_FD = descriptor.FieldDescriptor
_WRAPPERS = {
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}
_INT64_TYPES = {
    _FD.TYPE_INT64,
    _FD.TYPE_UINT64,
    _FD.TYPE_SINT64,
    _FD.TYPE_FIXED64,
    _FD.TYPE_SFIXED64,
}
# JsonEscaping escapes these beyond what json.dumps does (HTML safety, invisible marks).
_PB_ESCAPES = {
    c: f"\\u{c:04x}"
    for c in chain(
        (0x3C, 0x3E, 0x7F, 0xAD, 0x6DD, 0x70F, 0x17B4, 0x17B5, 0xFEFF),
        range(0x80, 0xA0),
        range(0x600, 0x604),
        range(0x200B, 0x2010),
        range(0x2028, 0x202F),
        range(0x2060, 0x2065),
        range(0x206A, 0x2070),
        range(0xFFF9, 0xFFFC),
    )
}
_PB_ESCAPES.update(
    {
        c: json.dumps(chr(c))[1:-1]
        for c in chain((0xE0001,), range(0x1D173, 0x1D17B), range(0xE0020, 0xE0080))
    }
)


def _pb_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).translate(_PB_ESCAPES)


def _is_wrapper(field: descriptor.FieldDescriptor) -> bool:
    return field.type == _FD.TYPE_MESSAGE and field.message_type.full_name in _WRAPPERS


def _simple_float(value: float, is_float32: bool) -> str:
    """SimpleFtoa() / SimpleDtoa(); non-finite values as strings."""
    if not math.isfinite(value):
        return '"' + _decimal(value, False) + '"'
    text = format(value, ".6g" if is_float32 else ".15g")
    back = float(text)
    if (np.float32(back) != np.float32(value)) if is_float32 else back != value:
        text = format(value, ".9g" if is_float32 else ".17g")
    return text


def _pb_value(field: descriptor.FieldDescriptor, value: Any, level: int, names: bool) -> str:
    kind = field.type
    if _is_wrapper(field):
        return _pb_value(field.message_type.fields_by_name["value"], value.value, level, names)
    if kind == _FD.TYPE_MESSAGE:
        return _pb_object(value, level, names)
    if kind == _FD.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return _pb_string(enum_value.name) if enum_value else str(value)
    if kind in _INT64_TYPES:
        return f'"{value}"'
    if kind in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
        return _simple_float(value, kind == _FD.TYPE_FLOAT)
    if kind == _FD.TYPE_BOOL:
        return "true" if value else "false"
    if kind == _FD.TYPE_BYTES:
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if kind == _FD.TYPE_STRING:
        return _pb_string(value)
    return str(value)


def _pb_container(items: list[str], level: int, braces: str) -> str:
    if not items:
        return braces
    inner = "\n" + " " * (level + 1)
    return braces[0] + ",".join(inner + item for item in items) + "\n" + " " * level + braces[1]


def _pb_field(message: Any, field: descriptor.FieldDescriptor, level: int, names: bool) -> str:
    value = getattr(message, field.name)
    if field.message_type and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return _pb_container(
            [
                _pb_string(str(key).lower() if isinstance(key, bool) else str(key))
                + ": "
                + _pb_value(value_field, value[key], level + 1, names)
                for key in sorted(value)
            ],
            level,
            "{}",
        )
    if field.is_repeated:
        return _pb_container(
            [_pb_value(field, item, level + 1, names) for item in value], level, "[]"
        )
    return _pb_value(field, value, level, names)


def _pb_object(message: Any, level: int, names: bool) -> str:
    placed, late = [], []
    for field in message.DESCRIPTOR.fields:
        if field.is_repeated or (field.type != _FD.TYPE_MESSAGE and field.containing_oneof is None):
            placed.append(field)
        elif message.HasField(field.name):
            late_field = field.type != _FD.TYPE_MESSAGE or _is_wrapper(field)
            (late if late_field else placed).append(field)
    fields = placed + sorted(late, key=lambda field: field.number)
    return _pb_container(
        [
            _pb_string(field.name if names else field.json_name)
            + ": "
            + _pb_field(message, field, level + 1, names)
            for field in fields
        ],
        level,
        "{}",
    )


def status_json(msg: Any) -> bytes:
    """GetModelStatusResponse as the REST status endpoint prints it (field json_names).

    TF Serving always sets each version's status (ToStatusProto(health)), so an unset
    status prints as {"error_code": "OK", "error_message": ""}.
    """
    copy = type(msg)()
    copy.CopyFrom(msg)
    msg = copy
    for version_status in msg.model_version_status:
        version_status.status.SetInParent()
    return _utf8(_pb_object(msg, 0, False) + "\n")


def metadata_json(msg: Any) -> bytes:
    """GetModelMetadataResponse as the REST metadata endpoint prints it (ToJsonString():
    model_spec and the unpacked SignatureDefMap printed apart, proto field names)."""
    if "signature_def" not in msg.metadata:
        raise internal(
            "Failed to find 'signature_def' key in the GetModelMetadataResponse metadata map."
        )
    signatures = get_model_metadata_pb2.SignatureDefMap()
    if not msg.metadata["signature_def"].Unpack(signatures):
        raise internal("Failed to unpack 'Any' object to 'SignatureDefMap'.")
    return _utf8(
        '{\n"model_spec":'
        + _pb_object(msg.model_spec, 0, True)
        + "\n,\n"
        + '"metadata": {"signature_def": '
        + _pb_object(signatures, 0, True)
        + "\n}\n}\n"
    )
