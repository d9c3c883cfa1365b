"""core.tensor_protos: TensorProto <-> numpy with TF Serving's typed value fields."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.core.framework import tensor_pb2, types_pb2

from tfs_model_server.core.tensor_protos import to_ndarray, to_proto
from tfs_model_server.errors import Code, ServingError


@pytest.mark.parametrize(
    ("array", "field"),
    [
        (np.array([[1.5, 2.5]], np.float32), "float_val"),
        (np.array([1.0], np.float64), "double_val"),
        (np.array([1, 2], np.int32), "int_val"),
        (np.array([2**40], np.int64), "int64_val"),
        (np.array([True]), "bool_val"),
        (np.array([b"a", b"bc"], dtype=object), "string_val"),
        (np.array([1.5], np.float16), "half_val"),
    ],
)
def test_outputs_use_typed_fields_and_round_trip(array: np.ndarray, field: str) -> None:
    proto = to_proto(array)
    assert list(getattr(proto, field)) and not proto.tensor_content
    back = to_ndarray(proto)
    assert back.shape == array.shape and back.tolist() == array.tolist()


def test_a_dtype_without_a_typed_field_uses_tensor_content() -> None:
    proto = to_proto(np.array([1 + 2j], np.complex64))
    assert proto.dtype == types_pb2.DT_COMPLEX64 and proto.tensor_content


def test_a_malformed_request_tensor_names_its_alias() -> None:
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_content=b"\x00")
    proto.tensor_shape.dim.add(size=4)
    with pytest.raises(ServingError) as info:
        to_ndarray(proto, "x")
    assert (info.value.code, info.value.message) == (
        Code.INVALID_ARGUMENT,
        "tensor parsing error: x",
    )
