"""One JSON value (nested lists of leaves) as a tensor of a TF dtype, with TF Serving's rules.

A port of json_tensor.cc's AddValueToTensor/FillTensorProto: which JSON leaves each dtype
accepts (any number for a float or double, rounded as a C cast rounds it), rectangular
nesting, with its error texts. Well-formed input is converted vectorised; anything else
takes the element-by-element walk that finds the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2

from tfs_model_server.codec.base64_objects import decode_b64_object
from tfs_model_server.codec.value_text import json_type, value_to_string
from tfs_model_server.errors import ServingError, invalid_argument, unimplemented
from tfs_model_server.tensor_spec import DTYPE_NAMES
from tfs_rest_json import utf8 as _utf8

_INT32 = (-(2**31), 2**31 - 1)
INT64_MAX = 2**63 - 1
_INT64 = (-(2**63), INT64_MAX)
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
MAX_DIMS = 64  # numpy's limit (TF's own is 254): deeper JSON nesting is refused

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


def _type_error(value: Any, dtype: int) -> ServingError:
    return invalid_argument(
        f"JSON Value: {value_to_string(value)} Type: {json_type(value)} "
        f"is not of expected type: {_dtype_name(dtype)}"
    )


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _tensor_value(value: Any, dtype: int) -> Any:
    """AddValueToTensor(): one JSON leaf as a value of `dtype`."""
    if dtype in _DECIMALS:
        if type(value) not in (int, float):
            raise _type_error(value, dtype)
        return value
    if dtype not in _NP_DTYPES:
        raise unimplemented(
            f"Conversion of JSON Value: {value_to_string(value)} to type: {_dtype_name(dtype)}"
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
            return decode_b64_object(value)
        raise _type_error(value, dtype)
    return _tensor_value(value, dtype)


def _check_rank(rank: int) -> None:
    """A tensor of more dimensions than an ndarray holds is the request's fault (400)."""
    if rank > MAX_DIMS:
        raise invalid_argument(
            f"Too many dimensions: the JSON value is nested {rank} levels deep "
            f"(a tensor has at most {MAX_DIMS})"
        )


def _dense_shape(value: Any) -> list[int]:
    """GetDenseTensorShape(): sizes along the first element of each nested list."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    _check_rank(len(shape))
    return shape


def _fill(value: Any, level: int, shape: list[int], dtype: int, out: list) -> None:
    """FillTensorProto(): check the nesting against `shape` and collect leaves."""
    rank = len(shape)
    if not isinstance(value, list):
        if level != rank:
            raise invalid_argument(
                f"JSON Value: {value_to_string(value)} found at incorrect level: {level + 1} "
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
        from tfs_model_server import tf_runtime

        return tf_runtime.as_dtype(dtype).as_numpy_dtype
    except (TypeError, ValueError):
        return object


def _decimal_array(values: list, dtype: int) -> np.ndarray:
    """rapidjson's GetDouble(), then GetFloat()'s static_cast<float>: out of range is inf."""
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np.float64).astype(_NP_DTYPES[dtype])


def make_array(values: list, shape: Sequence[int], dtype: int) -> np.ndarray:
    """Values already checked by _tensor_value() as an ndarray of `dtype`."""
    _check_rank(len(shape))
    np_dtype = _np_dtype(dtype)
    if dtype in _DECIMALS:
        array = _decimal_array(values, dtype)
    elif np_dtype is object:
        array = np.empty(len(values), dtype=object)
        array[:] = values
    elif dtype in _SMALL_INTS:  # TF copies int_val (int32) into the narrower type
        array = np.array(values, dtype=np.int64).astype(np_dtype)
    else:
        array = np.array(values, dtype=np_dtype)
    return array.reshape(shape)


def exact_tensor(value: Any, dtype: int) -> tuple[list, list[int]]:
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


def fast_tensor(value: Any, dtype: int) -> np.ndarray | None:
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
            return make_array([_utf8(s) for s in flat], shape, dtype)
        if dtype in _DECIMALS:
            return _decimal_array(flat, dtype).reshape(shape) if types <= {int, float} else None
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


def as_tensor(value: Any, dtype: int) -> np.ndarray:
    """One JSON value (list nesting of leaves) as a tensor of `dtype`."""
    array = fast_tensor(value, dtype) if dtype in _NP_DTYPES else None
    if array is None:
        values, shape = exact_tensor(value, dtype)
        array = make_array(values, shape, dtype)
    return array
