"""The TensorFlow-free PredictRequest/PredictResponse subset against TensorFlow's own protos."""

from __future__ import annotations

import numpy as np
import pytest
from sagemaker_serving import tfs_wire

tf = pytest.importorskip("tensorflow")
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2  # noqa: E402
from tensorflow_serving.apis import model_pb2, predict_pb2  # noqa: E402

PAIRS = [
    (tfs_wire.PredictRequest, predict_pb2.PredictRequest),
    (tfs_wire.PredictResponse, predict_pb2.PredictResponse),
    (tfs_wire.TensorProto, tensor_pb2.TensorProto),
    (tfs_wire.TensorProto().tensor_shape.__class__, tensor_shape_pb2.TensorShapeProto),
    (
        tfs_wire.TensorProto().tensor_shape.dim.add().__class__,
        tensor_shape_pb2.TensorShapeProto.Dim,
    ),
    (tfs_wire.PredictRequest().model_spec.__class__, model_pb2.ModelSpec),
]
ENUM, INT32 = 14, 5  # FieldDescriptor types: an enum is an int32 varint on the wire


@pytest.mark.parametrize(("ours", "theirs"), PAIRS, ids=lambda c: c.DESCRIPTOR.name)
def test_every_field_we_declare_matches_tensorflow(ours, theirs):
    theirs_by_number = {f.number: f for f in theirs.DESCRIPTOR.fields}
    for field in ours.DESCRIPTOR.fields:
        other = theirs_by_number[field.number]
        assert field.name == other.name
        assert (field.type, other.type) in {(other.type, other.type), (INT32, ENUM)}, field.name
        assert field.is_repeated == other.is_repeated, field.name


DTYPES = [np.float32, np.float64, np.int32, np.uint8, np.int16, np.int8, np.int64, np.bool_,
          np.uint16, np.float16, np.uint32, np.uint64]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_arrays_round_trip_through_tensorflow(dtype):
    array = (np.arange(12).reshape(3, 4) % 2 == 0) if dtype is np.bool_ else np.arange(12)
    array = array.reshape(3, 4).astype(dtype)
    wire = tfs_wire.predict_request("m", 7, "sig", {"x": array})
    request = predict_pb2.PredictRequest.FromString(wire)
    assert (request.model_spec.name, request.model_spec.version.value) == ("m", 7)
    assert request.model_spec.signature_name == "sig"
    np.testing.assert_array_equal(tf.make_ndarray(request.inputs["x"]), array)
    response = predict_pb2.PredictResponse()
    response.outputs["y"].CopyFrom(tf.make_tensor_proto(array))
    (back,) = tfs_wire.predict_outputs(response.SerializeToString()).values()
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)


def test_strings_and_value_fields_with_tensorflows_repeat_rule():
    response = predict_pb2.PredictResponse()
    response.outputs["s"].CopyFrom(tf.make_tensor_proto([b"a", b"\xff\x00"]))
    filled = response.outputs["f"]  # 3 elements, one value: TensorFlow repeats the last
    filled.dtype = 1
    filled.tensor_shape.dim.add(size=3)
    filled.float_val.append(1.5)
    half = response.outputs["h"]
    half.dtype = 19
    half.tensor_shape.dim.add(size=2)
    half.half_val.extend(np.array([0.5, -2.0], np.float16).view(np.uint16).tolist())
    out = tfs_wire.predict_outputs(response.SerializeToString())
    assert out["s"].tolist() == [b"a", b"\xff\x00"]
    assert out["f"].tolist() == [1.5, 1.5, 1.5]
    assert out["h"].tolist() == [0.5, -2.0]


def test_unsupported_dtypes_are_named():
    with pytest.raises(tfs_wire.UnsupportedTensor, match="complex"):
        tfs_wire.predict_request("m", None, None, {"x": np.zeros(2, np.complex64)})
    response = predict_pb2.PredictResponse()
    response.outputs["r"].dtype = 20  # DT_RESOURCE
    with pytest.raises(tfs_wire.UnsupportedTensor, match="DataType 20"):
        tfs_wire.predict_outputs(response.SerializeToString())
