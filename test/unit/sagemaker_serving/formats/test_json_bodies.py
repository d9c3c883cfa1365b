"""sagemaker_serving.formats.json_bodies: application/json and JSON Lines bodies as TF Serving
REST requests. Generated bodies are also fed to the model server's TF Serving JSON parser
(tfs_model_server.codec) to check that TF Serving would accept them as meant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from format_helpers import (
    assert_400_naming,
    decode_error,
    doc,
    spec,
    specs,
    tf_serving_examples,
    tf_serving_inputs,
)
from sagemaker_serving.config.body_formats import JSON_LINES_NAMES
from sagemaker_serving.formats.request import decode_request

# ------------------------------------------------------------------------------ JSON


@pytest.mark.parametrize(
    "body",
    [
        b'{"instances": [[1, 2]]}',
        b'{"signature_name": "s", "inputs": {"a": [1]}}',
        b'{"examples": [{"x": 1}]}',
        b'  {"instances": [NaN, Infinity, -Infinity]}\n',
    ],
)
def test_json_passthrough_unchanged(body):
    assert decode_request(body, "application/json", None).body == body


def test_json_passthrough_records():
    assert decode_request(b'{"instances": [1, 2, 3]}', "application/json", None).records == 3
    assert decode_request(b'{"examples": [{}, {}]}', "application/json", None).records == 2
    assert decode_request(b'{"inputs": [1, 2, 3]}', "application/json", None).records is None


def test_json_list_of_lists_is_instances():
    request = decode_request(b"[[1, 2.0], [3, 4]]", "application/json", None)
    assert request.records == 2
    assert request.body == b'{"instances":[[1, 2.0], [3, 4]]}'  # client text kept verbatim
    assert doc(request) == {"instances": [[1, 2.0], [3, 4]]}


@pytest.mark.parametrize(
    ("body", "instance"),
    [
        (b"[1, 2, 3]", [1, 2, 3]),
        (b"3.5", 3.5),
        (b'"text"', "text"),
        (b'{"a": 1, "b": [2]}', {"a": 1, "b": [2]}),
        (b'{"b64": "AAE="}', {"b64": "AAE="}),
        (b"[]", []),
    ],
)
def test_json_other_values_are_one_instance(body, instance):
    request = decode_request(body, "application/json", None)
    assert request.records == 1
    assert doc(request) == {"instances": [instance]}


def test_json_nan_tokens_survive():
    request = decode_request(b"[[NaN, Infinity], [-Infinity, 1]]", "application/json", None)
    assert b"NaN" in request.body and b"-Infinity" in request.body
    value = doc(request)["instances"]
    assert math.isnan(value[0][0]) and value[0][1] == math.inf and value[1][0] == -math.inf


def test_json_lines_in_application_json():
    request = decode_request(b'{"a": 1}\n{"a": 2}\n\n{"a": NaN}\n', "application/json", None)
    assert request.records == 3
    instances = doc(request)["instances"]
    assert instances[:2] == [{"a": 1}, {"a": 2}] and math.isnan(instances[2]["a"])


def test_json_classify_wraps_examples():
    request = decode_request(b'{"x": 1.5}\n{"x": 2.5}', "application/json", None, "classify")
    assert doc(request) == {"examples": [{"x": 1.5}, {"x": 2.5}]}
    tf_serving_examples(request)


@pytest.mark.parametrize("body", [b"{", b"[1, 2", b"nan", b"{'a': 1}", b"[1]\n[2"])
def test_json_malformed_400(body):
    assert_400_naming(body, "application/json", "Malformed JSON")


@pytest.mark.parametrize("body", [b"", b"   ", b"\xef\xbb\xbf\n"])
def test_json_empty_400(body):
    err = decode_error(body, "application/json", None)
    assert (err.status, err.message) == (400, "Empty request body: expected JSON")


@pytest.mark.parametrize(
    "body", [b'{"instances": [1.0, ', b' {"inputs": {"x": [1]}} trailing', b'{"examples": [}']
)
def test_json_that_starts_as_a_tf_serving_request_passes_through_unparsed(body):
    # as on the fast path: TF Serving names what is wrong (or ignores what trails)
    request = decode_request(body, "application/json", None)
    assert (request.body, request.records) == (body, None)


def test_curl_form_urlencoded_is_json():
    request = decode_request(b"[[1, 2]]", "application/x-www-form-urlencoded", None)
    assert doc(request) == {"instances": [[1, 2]]}


def test_json_list_with_a_non_list_is_one_instance():
    assert doc(decode_request(b"[[1], 2]", "application/json", None)) == {"instances": [[[1], 2]]}


def test_json_utf8_bom():
    assert doc(decode_request(b"\xef\xbb\xbf[1]", "application/json", None)) == {"instances": [[1]]}


# ------------------------------------------------------------------------ JSON Lines


@pytest.mark.parametrize("ctype", JSON_LINES_NAMES)
def test_json_lines(ctype):
    body = b'[1, 2]\r\n\n{"instances": [3]}\n"s"\n4.5'
    request = decode_request(body, ctype + "; charset=utf-8", None)
    assert request.records == 4
    assert doc(request) == {"instances": [[1, 2], {"instances": [3]}, "s", 4.5]}


def test_json_lines_bad_line_names_number():
    assert_400_naming(b"[1]\n\n[2\n[3]", "application/jsonlines", "line 3")


def test_json_lines_empty_400():
    err = decode_error(b"\n \n", "application/jsonlines", None)
    assert (err.status, err.message) == (400, "Empty request body: expected JSON Lines")


def test_json_lines_one_tf_serving_request_passes_through():
    request = decode_request(b'\n{"instances": [1, 2]}\n', "application/x-ndjson", None)
    assert (request.body, request.records) == (b'{"instances": [1, 2]}', 2)


def test_json_lines_regress():
    request = decode_request(b'{"x": 1.0}\n{"x": 2.0}\n', "application/jsonlines", None, "regress")
    assert doc(request) == {"examples": [{"x": 1.0}, {"x": 2.0}]}


def test_json_lines_accepted_by_tf_serving():
    request = decode_request(b"[1.0, 2.0]\n[3.0, NaN]", "application/jsonlines", None)
    arrays, row_format = tf_serving_inputs(request, specs(spec("x")))
    assert row_format and arrays["x"].shape == (2, 2) and np.isnan(arrays["x"][1, 1])


@pytest.mark.parametrize(
    "body",
    [
        b"1" * 4301,
        b"[" + b"9" * 100_000 + b", NaN]",
        b"[1e" + b"1" * 5000 + b"]",
        b'{"instances": [' + b"1" * 4301 + b"]}",
    ],
)
def test_json_long_numbers_go_on_as_written(body):
    """Integers longer than int() reads and long exponents are not the service's to refuse:
    the text goes on unchanged, and the model server reads or refuses the number as on the
    fast path (never a 500 here)."""
    request = decode_request(body, "application/json", None)
    assert body in request.body
