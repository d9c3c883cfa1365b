"""codec.tensors: JSON values as tensors of a dtype, with TF Serving's rules and texts; the
vectorised path gives what the element-by-element walk gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import types_pb2

from tfs_model_server.codec.tensors import as_tensor, exact_tensor, fast_tensor, make_array
from tfs_model_server.errors import Code, ServingError


@pytest.mark.parametrize(
    ("value", "dtype", "expected", "np_dtype"),
    [
        ([[1, 2.5]], types_pb2.DT_FLOAT, [[1.0, 2.5]], np.float32),
        ([1, 2], types_pb2.DT_INT8, [1, 2], np.int8),
        ([True, False], types_pb2.DT_BOOL, [True, False], np.bool_),
        (["a", {"b64": "Yg=="}], types_pb2.DT_STRING, [b"a", b"b"], object),
        (7, types_pb2.DT_INT64, 7, np.int64),
        ([2**53 + 1, 1e39], types_pb2.DT_FLOAT, [2.0**53, float("inf")], np.float32),
        ([2**53 + 1], types_pb2.DT_DOUBLE, [2.0**53], np.float64),
    ],
)
def test_as_tensor(value, dtype, expected, np_dtype) -> None:
    array = as_tensor(value, dtype)
    assert array.dtype == np_dtype and array.tolist() == expected


@pytest.mark.parametrize(
    ("value", "dtype", "code", "message"),
    [
        ([1, 2**31], types_pb2.DT_INT32, Code.INVALID_ARGUMENT, "JSON Value: 2147483648 Type: "),
        ([-1], types_pb2.DT_UINT32, Code.INVALID_ARGUMENT, "JSON Value: -1 Type: Number"),
        ([1.5], types_pb2.DT_HALF, Code.UNIMPLEMENTED, "Conversion of JSON Value: 1.5"),
        ([{"b64": "eA=="}], types_pb2.DT_INT32, Code.INVALID_ARGUMENT, "JSON Value: {"),
        ([[1], 2], types_pb2.DT_INT32, Code.INVALID_ARGUMENT, "JSON Value: 2 found at incorrect"),
    ],
)
def test_as_tensor_errors(value, dtype, code, message) -> None:
    with pytest.raises(ServingError) as info:
        as_tensor(value, dtype)
    assert info.value.code == code
    assert info.value.message.startswith(message)


_DTYPES = [
    types_pb2.DT_FLOAT,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_INT32,
    types_pb2.DT_INT64,
    types_pb2.DT_UINT8,
    types_pb2.DT_BOOL,
    types_pb2.DT_STRING,
]
_LEAVES = st.one_of(
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, width=64),
    st.booleans(),
    st.text(max_size=3),
)


def _exact(value, dtype: int) -> np.ndarray | ServingError:
    try:
        values, shape = exact_tensor(value, dtype)
    except ServingError as err:
        return err
    return make_array(values, shape, dtype)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_DTYPES),
    st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(_LEAVES, min_size=n, max_size=n))),
)
def test_the_fast_path_agrees_with_the_exact_walk(dtype: int, value: list) -> None:
    fast = fast_tensor(value, dtype)
    if fast is None:
        return  # the exact walk decides (and names the error)
    exact = _exact(value, dtype)
    assert isinstance(exact, np.ndarray), exact
    assert fast.dtype == exact.dtype and fast.shape == exact.shape
    assert fast.tolist() == exact.tolist()
