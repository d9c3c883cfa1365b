"""sagemaker_serving.formats.tensors: which built-in payloads go over gRPC as tensors, and
that their outputs answer the bytes the REST path answers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from format_helpers import npy
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.answers import encode_response
from sagemaker_serving.formats.builtin import BuiltinFormats
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.signature import InputSpec
from sagemaker_serving.formats.tensors import tensor_request
from sagemaker_serving.formats.tfrecord import frame_tfrecord
from sagemaker_serving.tfs_client.wire import Example
from tfs_model_server.codec.responses import predict_response

IMAGE_IN = {"image_bytes": InputSpec("image_bytes", "DT_STRING", (-1,))}
FLOAT_IN = {"x": InputSpec("x", "DT_FLOAT", (-1, 3))}
OUT = {"y": InputSpec("y", "DT_FLOAT", (-1,))}


def test_raw_bytes_become_one_string_element_without_base64():
    request = tensor_request(b"\xff\xd8jpeg", "application/x-image", IMAGE_IN, OUT, "predict")
    assert request is not None and request.records == 1
    assert request.inputs["image_bytes"].tolist() == [b"\xff\xd8jpeg"]


def _example(label: bytes) -> bytes:
    example = Example()
    example.features.feature["label"].bytes_list.value.append(label)
    return example.SerializeToString()


def test_framed_records_become_one_element_each_in_order():
    records = [_example(b"one"), _example(b"two"), _example(b"three")]
    body = b"".join(frame_tfrecord(r) for r in records)
    request = tensor_request(body, "application/x-tfexample", IMAGE_IN, OUT, "predict")
    assert request is not None and request.records == 3
    assert request.inputs["image_bytes"].tolist() == records


def test_records_that_are_no_examples_are_refused_as_on_rest():
    body = frame_tfrecord(_example(b"one")) + frame_tfrecord(b"\x0a\x03bad")
    with pytest.raises(PayloadError) as info:
        tensor_request(body, "application/x-tfexample", IMAGE_IN, OUT, "predict")
    assert info.value.status == 400 and info.value.message.startswith("Record 1 is not")


def test_npy_of_the_inputs_dtype_goes_as_is():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    request = tensor_request(npy(array), "application/x-npy", FLOAT_IN, OUT, "predict")
    assert request is not None and request.records == 2
    np.testing.assert_array_equal(request.inputs["x"], array)


@pytest.mark.parametrize(
    "array",
    [np.array([["a", "é"], ["b", "c"]]), np.array([[b"a", "é".encode()], [b"b", b"c"]])],
    ids=["unicode", "bytes"],
)
def test_npy_strings_go_as_utf8_in_their_shape(array):
    inputs = {"s": InputSpec("s", "DT_STRING", (-1, 2))}
    request = tensor_request(npy(array), "application/x-npy", inputs, OUT, "predict")
    assert request is not None and request.records == 2
    assert request.inputs["s"].tolist() == [[b"a", "é".encode()], [b"b", b"c"]]


@pytest.mark.parametrize(
    ("body", "media", "inputs", "outputs", "method"),
    [
        # JSON's number conversions decide float64 -> float32: REST
        (npy(np.zeros((1, 3))), "application/x-npy", FLOAT_IN, OUT, "predict"),
        (b"not npy", "application/x-npy", FLOAT_IN, OUT, "predict"),  # REST names the error
        (b"img", "application/x-image", FLOAT_IN, OUT, "predict"),  # no string input: 415
        (b"img", "application/x-image", IMAGE_IN, OUT, "classify"),
        (b"img", "application/x-image", IMAGE_IN, {"s": InputSpec("s", "DT_FLOAT", ())}, "predict"),
        (
            b"img",
            "application/x-image",
            IMAGE_IN,
            {"s": InputSpec("s", "DT_FLOAT", None)},
            "predict",
        ),
        (b"", "application/x-image", IMAGE_IN, OUT, "predict"),  # REST's 400 for empty bodies
        (b"{}", "application/json", IMAGE_IN, OUT, "predict"),
    ],
)
def test_payloads_needing_json_conversions_stay_on_rest(body, media, inputs, outputs, method):
    assert tensor_request(body, media, inputs, outputs, method) is None


def answer(outputs: dict, accept: str | None = None) -> bytes:
    context = SimpleNamespace(accept_header=accept)
    return BuiltinFormats(None).tensor_answer(outputs, context)[0]


@pytest.mark.parametrize(
    "outputs",
    [
        {"y": np.array([[1 / 3, 2.5], [0.1, 1e-5]], np.float32)},
        {"y": np.array([1 / 3, np.nan, -np.inf], np.float64)},
        {
            "classes": np.array([3, 2**53 + 1], np.int64),
            "label_bytes": np.array([b"\x00a", b"b"], dtype=object),
            "label": np.array([b"three", b'"7", \n'], dtype=object),
            "flag": np.array([True, False]),
        },
    ],
    ids=["float32", "float64", "several"],
)
@pytest.mark.parametrize("accept", [None, "application/jsonlines", "text/csv"])
def test_grpc_outputs_answer_the_bytes_of_the_rest_path(outputs, accept):
    rest = predict_response(outputs, row_format=True)
    assert answer(outputs, accept) == encode_response(rest, accept)[0]


def test_float32_outputs_are_written_as_tf_serving_writes_them():
    outputs = {"y": np.array([0.12345679, 1 / 3, 3.0], np.float32)}
    assert answer(outputs) == b'{"predictions": [0.123456791, 0.333333343, 3.0]}'


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({"a": np.zeros(2), "b": np.zeros(3)}, "inconsistent batch size"),
        ({"a": np.float32(1.0).reshape(())}, "has no shape information"),
    ],
)
def test_outputs_tf_serving_cannot_write_are_its_400(outputs, message):
    with pytest.raises(StatusError) as info:
        answer(outputs)
    assert info.value.status == 400 and message in info.value.message


@pytest.mark.parametrize("code_point", [0x110000, 0xD800])
def test_an_invalid_code_point_in_a_string_array_is_400(code_point):
    body = bytearray(npy(np.array(["a"], dtype="<U1")))
    body[-4:] = code_point.to_bytes(4, "little")
    inputs = {"s": InputSpec("s", "DT_STRING", (-1,))}
    with pytest.raises(PayloadError) as info:
        tensor_request(bytes(body), "application/x-npy", inputs, OUT, "predict")
    assert info.value.status == 400
