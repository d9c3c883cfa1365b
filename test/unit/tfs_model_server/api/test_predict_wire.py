"""api.predict_wire: a PredictRequest read with its tensors' values left in the received bytes
is the request protobuf reads, for any request; a malformed one is refused as protobuf would."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow_serving.apis import predict_pb2

from tfs_model_server.api import predict_wire
from tfs_model_server.core.tensor_protos import to_ndarray

ARRAYS = st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8]).flatmap(
    lambda dtype: st.lists(st.integers(0, 5), min_size=0, max_size=3).map(
        lambda shape: np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    )
)


def _as_read(request: predict_wire.ReadPredict) -> predict_pb2.PredictRequest:
    """The read request with its values put back in (what protobuf's parser gives)."""
    message = predict_pb2.PredictRequest()
    message.CopyFrom(request.message)
    for name, content in request.contents.items():
        message.inputs[name].tensor_content = bytes(content)
    return message


@settings(max_examples=60, deadline=None)
@given(
    inputs=st.dictionaries(st.text(min_size=0, max_size=8), ARRAYS, max_size=3),
    name=st.text(max_size=10),
    version=st.none() | st.integers(0, 2**63 - 1),
    filters=st.lists(st.text(max_size=5), max_size=2),
    typed_values=st.booleans(),
)
def test_any_request_reads_as_protobuf_parses_it(inputs, name, version, filters, typed_values):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    request.output_filter.extend(filters)
    for alias, array in inputs.items():
        proto = tf.make_tensor_proto(array)
        if typed_values and array.dtype == np.float32:  # float_val, not tensor_content
            proto = tf.make_tensor_proto(array.tolist(), tf.float32, array.shape)
        request.inputs[alias].CopyFrom(proto)
    data = request.SerializeToString()
    read = predict_wire.read(data)
    assert _as_read(read) == predict_pb2.PredictRequest.FromString(data)
    for alias, array in inputs.items():
        decoded = to_ndarray(read.message.inputs[alias], alias, read.contents.get(alias))
        assert decoded.dtype == array.dtype
        np.testing.assert_array_equal(decoded, array)


def test_the_values_are_read_in_place_not_copied():
    array = np.arange(1000, dtype=np.float32)
    request = predict_pb2.PredictRequest()
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(array))
    data = request.SerializeToString()
    read = predict_wire.read(data)
    assert not read.message.inputs["x"].tensor_content
    decoded = to_ndarray(read.message.inputs["x"], "x", read.contents["x"])
    assert np.shares_memory(decoded, np.frombuffer(data, np.uint8))
    np.testing.assert_array_equal(decoded, array)


def test_a_repeated_key_and_a_repeated_value_hold_as_protobuf_holds_them():
    first, second = predict_pb2.PredictRequest(), predict_pb2.PredictRequest()
    for request, values in ((first, [1.0, 2.0]), (second, [7.0])):
        tensor = request.inputs["x"]
        tensor.dtype, tensor.tensor_content = 1, np.array(values, np.float32).tobytes()
        tensor.tensor_shape.dim.add(size=len(values))
    data = first.SerializeToString() + second.SerializeToString()  # two entries for "x"
    read = predict_wire.read(data)
    assert _as_read(read) == predict_pb2.PredictRequest.FromString(data)
    assert to_ndarray(read.message.inputs["x"], "x", read.contents["x"]).tolist() == [7.0]


@pytest.mark.parametrize(
    "data",
    [
        b"\x12",  # a field with no length
        b"\x12\x05ab",  # a length past the end
        b"\x12\x04\x0a\x08ab",  # an entry whose key runs past the entry
        b"\x0b",  # a group
        b"\xff" * 11,  # a varint too long
        b"\x12\x03\x0a\x01\xff",  # a key that is not UTF-8
    ],
)
def test_a_malformed_request_is_refused(data):
    with pytest.raises(DecodeError):
        predict_wire.read(data)
