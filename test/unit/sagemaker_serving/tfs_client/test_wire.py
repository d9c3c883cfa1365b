"""The TensorFlow-free PredictRequest/PredictResponse subset against TensorFlow's own protos."""

from __future__ import annotations

import numpy as np
import pytest

from sagemaker_serving.tfs_client import wire as tfs_wire

tf = pytest.importorskip("tensorflow")
from tensorflow.core.example import example_pb2, feature_pb2  # noqa: E402
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    model_management_pb2,
    model_pb2,
    predict_pb2,
    status_pb2,
)

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
    (tfs_wire.Example, example_pb2.Example),
    (tfs_wire.Example().features.__class__, feature_pb2.Features),
    (tfs_wire.Example().features.feature["x"].__class__, feature_pb2.Feature),
    (tfs_wire.Example().features.feature["x"].bytes_list.__class__, feature_pb2.BytesList),
    (tfs_wire.Example().features.feature["x"].float_list.__class__, feature_pb2.FloatList),
    (tfs_wire.Example().features.feature["x"].int64_list.__class__, feature_pb2.Int64List),
    (tfs_wire.ReloadConfigResponse, model_management_pb2.ReloadConfigResponse),
    (tfs_wire.ReloadConfigResponse().status.__class__, status_pb2.StatusProto),
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


def test_several_inputs_of_every_layout_parse_as_tensorflow_reads_them():
    """tensor_content is written after each TensorProto's other fields: any order, any size."""
    inputs = {
        "words": np.array([b"a", "\u00e9".encode()], dtype=object),
        "big": np.arange(70_000, dtype=">f4").reshape(350, 200).T,  # big-endian, not C order
        "empty": np.zeros((0, 3), np.float32),
        "scalar": np.array(4, np.int64),
    }
    wire = tfs_wire.predict_request("m", None, None, inputs)
    request = predict_pb2.PredictRequest.FromString(wire)
    assert set(request.inputs) == set(inputs)
    for name, array in inputs.items():
        np.testing.assert_array_equal(tf.make_ndarray(request.inputs[name]), array)


@pytest.mark.parametrize("shape", [(3, 4), (200, 300), (0, 5)])
def test_a_request_s_head_and_then_its_values_are_the_whole_request(shape):
    """A streamed request (grpc_stream.py): its head, then the body's values as they come."""
    array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    tensor = tfs_wire.tensor_head(array.shape, 1, tfs_wire.TensorProto())
    head = tfs_wire.predict_head("m", 7, "x", tensor, array.nbytes)
    whole = tfs_wire.predict_request("m", 7, None, {"x": array})
    assert head + array.tobytes() == whole
    request = predict_pb2.PredictRequest.FromString(whole)
    np.testing.assert_array_equal(tf.make_ndarray(request.inputs["x"]), array)


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


def test_examples_parse_like_tensorflows():
    example = tf.train.Example()
    example.features.feature["f"].float_list.value.extend([1.5, -2.0])
    example.features.feature["i"].int64_list.value.append(2**40)
    example.features.feature["b"].bytes_list.value.append(b"\xff")
    ours = tfs_wire.Example.FromString(example.SerializeToString())
    feature = ours.features.feature
    assert feature["f"].WhichOneof("kind") == "float_list"
    assert list(feature["f"].float_list.value) == [1.5, -2.0]
    assert list(feature["i"].int64_list.value) == [2**40]
    assert list(feature["b"].bytes_list.value) == [b"\xff"]


def test_the_service_serves_binary_formats_without_importing_tensorflow():
    import subprocess
    import sys

    code = """
import io, sys
import numpy as np
from sagemaker_serving.formats.request import decode_request
from sagemaker_serving.formats.signature import InputSpec
from sagemaker_serving.formats.tfrecord import frame_tfrecord
from sagemaker_serving import python_service
from sagemaker_serving.formats import tensors as tensor_payloads
from sagemaker_serving.tfs_client import wire as tfs_wire
example = tfs_wire.Example()
example.features.feature["x"].float_list.value.append(1.0)
body = frame_tfrecord(example.SerializeToString())
spec = {"x": InputSpec("x", "DT_FLOAT", (-1,))}
decode_request(body, "application/x-tfexample", spec)
buf = io.BytesIO(); np.save(buf, np.zeros(2, np.float32))
decode_request(buf.getvalue(), "application/x-npy", None)
wire = tfs_wire.predict_request("m", None, None, {"x": np.zeros(2, np.float32)})
assert "tensorflow" not in sys.modules, [m for m in sys.modules if m.startswith("tensorflow")]
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_reload_config_request_carries_a_serialized_model_server_config():
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add(name="m", base_path="/models/m")
    model.model_platform = "tensorflow"
    wire = tfs_wire.ReloadConfigRequest(config=config.SerializeToString()).SerializeToString()
    theirs = model_management_pb2.ReloadConfigRequest.FromString(wire)
    assert theirs.config == config
    (field,) = tfs_wire.ReloadConfigRequest.DESCRIPTOR.fields
    assert (
        field.number
        == model_management_pb2.ReloadConfigRequest.DESCRIPTOR.fields_by_name["config"].number
    )
