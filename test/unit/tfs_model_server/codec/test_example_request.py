"""example_request: classify/regress request JSON as tf.Examples, with TF Serving's errors."""

from __future__ import annotations

import math

import pytest
from google.protobuf import text_format
from tensorflow.core.example import example_pb2

from tfs_model_server.codec.example_request import classify_regress_request
from tfs_model_server.codec.json_reader import loads
from tfs_model_server.errors import Code, ServingError


def _error(call, *args) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value


def _examples(serialized: list[bytes]) -> list[example_pb2.Example]:
    return [example_pb2.Example.FromString(data) for data in serialized]


@pytest.mark.parametrize("verb", ["classify", "regress"])
def test_classify_regress_request_no_context(verb):
    doc = loads(
        '{"examples": [{"names": ["foo", "bar"], "ratings": [8.0, 9.0], "age": 20},'
        ' {"names": ["baz"], "ratings": 6.0}]}'
    )
    signature, examples, context = classify_regress_request(doc, verb)
    assert signature == "serving_default"
    assert context is None
    expected = [
        'features { feature { key: "names" value { bytes_list { value: ["foo", "bar"] } } }'
        ' feature { key: "ratings" value { float_list { value: [8.0, 9.0] } } }'
        ' feature { key: "age" value { int64_list { value: 20 } } } }',
        'features { feature { key: "names" value { bytes_list { value: "baz" } } }'
        ' feature { key: "ratings" value { float_list { value: 6.0 } } } }',
    ]
    assert _examples(examples) == [text_format.Parse(t, example_pb2.Example()) for t in expected]


@pytest.mark.parametrize("verb", ["classify", "regress"])
def test_classify_regress_request_with_context_and_signature(verb):
    doc = loads(
        """{"signature_name": "custom_signture",
            "context": {"query": "pizza", "location": ["sfo"]},
            "examples": [
              {"names": ["foo", "bar"], "ratings": [8.0, 9.0, NaN, Infinity], "age": 20},
              {"names": ["baz", {"b64": "aGVsbG8="}], "ratings": 6.0,
               "intboolmix": [1, true, false]},
              {"names": "bar", "ratings": -Infinity}]}"""
    )
    signature, examples, context = classify_regress_request(doc, verb)
    assert signature == "custom_signture"
    assert example_pb2.Example.FromString(context) == text_format.Parse(
        'features { feature { key: "query" value { bytes_list { value: "pizza" } } }'
        ' feature { key: "location" value { bytes_list { value: "sfo" } } } }',
        example_pb2.Example(),
    )
    first, second, third = _examples(examples)
    ratings = first.features.feature["ratings"].float_list.value
    assert ratings[:2] == [8.0, 9.0] and math.isnan(ratings[2]) and ratings[3] == math.inf
    assert second.features.feature["names"].bytes_list.value == [b"baz", b"hello"]
    assert second.features.feature["intboolmix"].int64_list.value == [1, 1, 0]
    assert third.features.feature["names"].bytes_list.value == [b"bar"]
    assert third.features.feature["ratings"].float_list.value == [-math.inf]


@pytest.mark.parametrize("verb", ["classify", "regress"])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '{"signature_name": ["hello"], "examples": [{"names": ["foo"]}]}',
            "'signature_name' key must be a string",
        ),
        (
            '{"context": [{"names": ["foo", "bar"]}]}',
            "Example must be JSON object but got JSON Array",
        ),
        (
            '{"examples": {"names": ["foo", "bar"]}}',
            "Expecting 'examples' value to be an list/array",
        ),
        ('{"examples": []}', "'examples' value is an empty array"),
        (
            '{"examples": [[{"names": ["foo", "bar"]}]]}',
            "Example must be JSON object but got JSON Array",
        ),
        (
            '{"examples": [{"names": [10, null]}]}',
            "Feature: names has element with unexpected JSON type: Null",
        ),
        (
            '{"examples": [{"names": [10, 10.0]}]}',
            "Unexpected element type in feature: names expecting type: int64",
        ),
        (
            '{"examples": [{"names": [10, {"test": 10}]}]}',
            "names has element with unexpected JSON type: Object",
        ),
        (
            '{"examples": [{"names": [[10], 20]}]}',
            "names has element with unexpected JSON type: Array",
        ),
        (
            '{"examples": [{"names": [20, 18446744073709551603]}]}',
            "Feature: names has uint64_t element. Only int64_t is supported.",
        ),
        ('{"examples": [{"names": {"b64": "%%%"}}]}', "Unable to base64 decode"),
        (
            "{}",
            "JSON Value: {} When method is classify, key 'examples' is expected and was not found",
        ),
    ],
)
def test_classify_regress_request_errors(verb, body, message):
    err = _error(classify_regress_request, loads(body), verb)
    assert err.code == Code.INVALID_ARGUMENT
    assert message in err.message


def test_float_features_are_rounded_not_refused():
    """GetFloat(): a number out of float range is stored as infinity, not refused."""
    doc = loads('{"examples": [{"x": [1.7976931348623157e308, -1e39, 16777217.0]}]}')
    (example,) = _examples(classify_regress_request(doc)[1])
    assert example.features.feature["x"].float_list.value == [math.inf, -math.inf, 16777216.0]
