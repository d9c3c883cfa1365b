"""sagemaker_serving.formats.npy: .npy arrays and .npz archives as TF Serving REST requests."""

from __future__ import annotations

import io

import numpy as np
import pytest

from format_helpers import decode_error, doc, npy, spec, specs, tf_serving_inputs
from sagemaker_serving.formats.request import decode_request


def test_npy_float_2d_with_nan():
    array = np.array([[0.5, np.nan], [np.inf, -2.0]], dtype=np.float32)
    request = decode_request(npy(array), "application/x-npy", None)
    assert request.records == 2
    assert b"NaN" in request.body and b"-Infinity" not in request.body
    got = np.array(doc(request)["instances"], dtype=np.float32)
    np.testing.assert_array_equal(got, array)


def test_npy_float32_exact():
    array = np.array([0.1, 1 / 3, 1e-30, 3.0], dtype=np.float32)
    request = decode_request(npy(array), "application/x-npy", specs(spec("x")))
    np.testing.assert_array_equal(np.array(doc(request)["instances"], np.float32), array)


def test_npy_int():
    request = decode_request(
        npy(np.arange(6, dtype=np.int64).reshape(3, 2)), "application/x-npy", None
    )
    assert request.records == 3
    assert doc(request) == {"instances": [[0, 1], [2, 3], [4, 5]]}
    arrays, _ = tf_serving_inputs(request, specs(spec("x", "DT_INT64")))
    assert arrays["x"].tolist() == [[0, 1], [2, 3], [4, 5]]


def test_npy_0d_is_one_instance():
    request = decode_request(npy(np.array(2.5)), "application/x-npy", None)
    assert (doc(request), request.records) == ({"instances": [2.5]}, 1)


def test_npy_bool_and_bytes():
    assert doc(decode_request(npy(np.array([True, False])), "application/x-npy", None)) == {
        "instances": [True, False]
    }
    request = decode_request(npy(np.array([b"ab", b"\xff"])), "application/x-npy", None)
    assert doc(request) == {"instances": [{"b64": "YWI="}, {"b64": "/w=="}]}


def test_npy_multi_input_is_columnar():
    inputs = specs(spec("ids", "DT_STRING"), spec("x", "DT_FLOAT", (-1, 2)))
    request = decode_request(npy(np.ones((2, 2), np.float32)), "application/x-npy", inputs)
    assert (doc(request), request.records) == ({"inputs": {"x": [[1.0, 1.0], [1.0, 1.0]]}}, 2)


def test_npz_is_columnar_by_name():
    out = io.BytesIO()
    np.savez(out, a=np.arange(3), b=np.zeros((3, 2)))
    request = decode_request(out.getvalue(), "application/x-npy", None)
    assert (doc(request), request.records) == (
        {"inputs": {"a": [0, 1, 2], "b": [[0.0, 0.0]] * 3}},
        3,
    )


@pytest.mark.parametrize("body", [b"", b"not numpy", npy(np.arange(4))[:-3]])
def test_npy_corrupt_400(body):
    assert decode_error(body, "application/x-npy", None).status == 400


def test_npy_pickle_refused_400():
    out = io.BytesIO()
    np.save(out, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    error = decode_error(out.getvalue(), "application/x-npy", None)
    assert error.status == 400 and "allow_pickle" not in error.message
    assert error.message.endswith("an array of Python objects (pickled) is refused")


def test_a_body_that_is_no_npy_says_so_not_numpys_pickle_advice():
    error = decode_error(bytes(range(256)) * 8, "application/x-npy", None)
    assert error.status == 400 and "allow_pickle" not in error.message
    assert error.message.endswith("neither a .npy array nor a .npz archive")


def test_npy_complex_400():
    assert decode_error(npy(np.array([1j])), "application/x-npy", None).status == 400
