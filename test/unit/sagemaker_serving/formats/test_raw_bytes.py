"""sagemaker_serving.formats.raw_bytes: application/x-image and application/octet-stream bodies
as the model's one DT_STRING input."""

from __future__ import annotations

import base64

import pytest

from format_helpers import decode_error, doc, spec, specs, tf_serving_inputs
from sagemaker_serving.formats.request import decode_request

IMAGE = bytes(range(256)) * 3


@pytest.mark.parametrize("ctype", ["application/x-image", "application/octet-stream"])
def test_bytes_single_input(ctype):
    for inputs in (None, specs(spec("image_bytes", "DT_STRING"))):
        request = decode_request(IMAGE, ctype, inputs)
        assert request.records == 1
        assert doc(request) == {"instances": [{"b64": base64.b64encode(IMAGE).decode()}]}


def test_bytes_multi_input_picks_the_string_one():
    inputs = specs(spec("scale"), spec("key", "DT_INT64"), spec("image", "DT_STRING", (-1,)))
    request = decode_request(IMAGE, "application/x-image", inputs)
    assert doc(request) == {"instances": [{"image": {"b64": base64.b64encode(IMAGE).decode()}}]}


@pytest.mark.parametrize(
    "inputs",
    [
        specs(spec("x")),
        specs(spec("x"), spec("y", "DT_INT32")),
        specs(spec("a", "DT_STRING"), spec("b", "DT_STRING")),
    ],
)
def test_bytes_without_a_bytes_input_415(inputs):
    err = decode_error(IMAGE, "application/x-image", inputs)
    assert err.status == 415
    assert "inference.py" in err.message


def test_bytes_empty_400():
    assert decode_error(b"", "application/octet-stream", None).status == 400


def test_bytes_accepted_by_tf_serving():
    inputs = specs(spec("image", "DT_STRING"))
    request = decode_request(IMAGE, "application/x-image", inputs)
    arrays, _ = tf_serving_inputs(request, inputs)
    assert arrays["image"].tolist() == [IMAGE]
