"""Which built-in payloads go over gRPC as tensors, and the REST document made from outputs."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from sagemaker_serving.payloads import InputSpec, encode_document, frame_tfrecord
from sagemaker_serving.tensor_payloads import response_document, tensor_request

IMAGE_IN = {"image_bytes": InputSpec("image_bytes", "DT_STRING", (-1,))}
FLOAT_IN = {"x": InputSpec("x", "DT_FLOAT", (-1, 3))}
OUT = {"y": InputSpec("y", "DT_FLOAT", (-1,))}


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_raw_bytes_become_one_string_element_without_base64():
    request = tensor_request(b"\xff\xd8jpeg", "application/x-image", IMAGE_IN, OUT, "predict")
    assert request is not None and request.records == 1
    assert request.inputs["image_bytes"].tolist() == [b"\xff\xd8jpeg"]


def test_framed_records_become_one_element_each_in_order():
    records = [b"one", b"two", b"three"]
    body = b"".join(frame_tfrecord(r) for r in records)
    request = tensor_request(body, "application/x-tfexample", IMAGE_IN, OUT, "predict")
    assert request is not None and request.records == 3
    assert request.inputs["image_bytes"].tolist() == records


def test_npy_of_the_inputs_dtype_goes_as_is():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    request = tensor_request(npy(array), "application/x-npy", FLOAT_IN, OUT, "predict")
    assert request is not None and request.records == 2
    np.testing.assert_array_equal(request.inputs["x"], array)


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


def test_one_output_is_a_list_of_rows_with_float32_decimals():
    doc, nonfinite = response_document({"y": np.array([[0.1, 2.5]], np.float32)})
    assert doc == {"predictions": [[0.1, 2.5]]} and not nonfinite
    body, content_type = encode_document(doc, nonfinite, "application/json")
    assert body == b'{"predictions":[[0.1,2.5]]}\n' and content_type == "application/json"


def test_several_outputs_are_objects_per_row_with_bytes_outputs_as_b64():
    outputs = {
        "classes": np.array([3, 7], np.int64),
        "label_bytes": np.array([b"\x00a", b"b"], dtype=object),
        "label": np.array([b"three", b"seven"], dtype=object),
    }
    doc, _ = response_document(outputs)
    assert doc["predictions"] == [
        {"classes": 3, "label_bytes": {"b64": "AGE="}, "label": "three"},
        {"classes": 7, "label_bytes": {"b64": "Yg=="}, "label": "seven"},
    ]


def test_nonfinite_values_are_flagged_and_written_as_tf_serving_does():
    doc, nonfinite = response_document({"y": np.array([np.nan, -np.inf, 1.0], np.float32)})
    assert nonfinite
    assert encode_document(doc, nonfinite, "text/csv")[0] == b"NaN\n-Infinity\n1.0\n"


def test_outputs_without_a_common_batch_size_are_refused():
    assert response_document({"a": np.zeros(2), "b": np.zeros(3)}) is None
    assert response_document({"a": np.float32(1.0).reshape(())}) is None


def test_json_lines_has_one_line_per_record():
    doc, nonfinite = response_document({"y": np.array([2.5, 3.0, 4.5], np.float32)})
    body, _ = encode_document(doc, nonfinite, "application/jsonlines")
    assert [json.loads(line) for line in body.splitlines()] == [2.5, 3.0, 4.5]


@pytest.mark.parametrize("code_point", [0x110000, 0xD800])
def test_an_invalid_code_point_in_a_string_array_is_400(code_point):
    from sagemaker_serving.payloads import PayloadError

    body = bytearray(npy(np.array(["a"], dtype="<U1")))
    body[-4:] = code_point.to_bytes(4, "little")
    inputs = {"s": InputSpec("s", "DT_STRING", (-1,))}
    with pytest.raises(PayloadError) as info:
        tensor_request(bytes(body), "application/x-npy", inputs, OUT, "predict")
    assert info.value.status == 400
