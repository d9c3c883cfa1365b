"""sagemaker_serving.formats.tfexample: serialized tf.train.Examples, bare or in TFRecord
frames, as TF Serving REST requests; how the service phrases a bad frame."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format_helpers import (
    decode_error,
    doc,
    make_example,
    spec,
    specs,
    tf_serving_examples,
    tf_serving_inputs,
)
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request import decode_request
from sagemaker_serving.formats.tfexample import parse_examples, split_tfrecords
from sagemaker_serving.formats.tfrecord import frame_tfrecord
from sagemaker_serving.tfs_client.wire import Example
from tfrecord_cases import CORRUPTIONS, Corruption


def framed(*records: bytes) -> bytes:
    return b"".join(map(frame_tfrecord, records))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=6))
def test_split_tfrecords_round_trip(records):
    assert split_tfrecords(framed(*records)) == records


def test_split_tfrecords_not_framed():
    bare = make_example(x=1.5).SerializeToString()
    assert split_tfrecords(bare) is None
    assert split_tfrecords(b"") is None
    assert split_tfrecords(framed(bare) + b"\x00") is None  # not exactly to the end
    assert split_tfrecords(framed(bare)[:-1]) is None


@pytest.mark.parametrize("case", CORRUPTIONS, ids=lambda case: case.name)
def test_a_bad_frame_is_a_bare_body_or_a_400_naming_the_record(case: Corruption):
    if not case.in_data:
        assert split_tfrecords(case.data) is None  # then parsed as one bare tf.Example
        return
    with pytest.raises(PayloadError) as info:
        split_tfrecords(case.data)
    assert (info.value.status, info.value.message) == (
        400,
        f"Corrupt TFRecord: record {case.index}: data CRC mismatch",
    )


def test_parse_examples_names_the_record_that_is_none():
    good = make_example(x=1.0).SerializeToString()
    assert parse_examples([good]) == [Example.FromString(good)]
    with pytest.raises(PayloadError) as info:
        parse_examples([good, b"\xff\xff"])
    assert info.value.status == 400
    assert info.value.message.startswith("Record 1 is not a serialized tf.train.Example")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "f": st.lists(st.floats(width=32, allow_nan=False), max_size=3),
                "i": st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3),
                "b": st.lists(st.binary(max_size=8), min_size=1, max_size=2),
            }
        ),
        min_size=1,
        max_size=4,
    )
)
def test_tfrecord_examples_round_trip_through_classify(features):
    examples = [make_example(**f) for f in features]
    body = framed(*(e.SerializeToString() for e in examples))
    request = decode_request(body, "application/x-tfexample", None, "classify")
    assert request.records == len(examples)
    for want, got in zip(examples, tf_serving_examples(request), strict=True):
        got = Example.FromString(got)
        for name in ("i", "b"):
            assert got.features.feature[name] == want.features.feature[name]
        assert list(got.features.feature["f"].float_list.value) == list(
            want.features.feature["f"].float_list.value
        )


def test_tfexample_bare_predict_serialized_input():
    record = make_example(x=[1.0, 2.0], name=b"n").SerializeToString()
    for ctype in ("application/x-tfexample", "application/tfrecord", "application/x-tfrecord"):
        for inputs in (None, specs(spec("examples", "DT_STRING"))):
            request = decode_request(record, ctype, inputs)
            assert request.records == 1
            assert doc(request) == {"instances": [{"b64": base64.b64encode(record).decode()}]}


def test_tfexample_framed_predict_serialized_input():
    records = [make_example(x=float(i)).SerializeToString() for i in range(3)]
    body = framed(*records)
    inputs = specs(spec("inputs", "DT_STRING"))
    request = decode_request(body, "application/x-tfexample", inputs)
    assert request.records == 3
    arrays, _ = tf_serving_inputs(request, inputs)
    assert arrays["inputs"].tolist() == records


def test_tfexample_serialized_input_among_several():
    record = make_example(x=1.0).SerializeToString()
    inputs = specs(spec("examples", "DT_STRING"), spec("x"))
    request = decode_request(record, "application/x-tfexample", inputs)
    assert doc(request) == {
        "instances": [{"examples": {"b64": base64.b64encode(record).decode()}, "x": 1.0}]
    }


def test_tfexample_features_to_inputs():
    examples = [
        make_example(x=[1.0, 2.0], k=7, s=b"\xff", extra=3),
        make_example(x=[3.0, float("nan")], k=8, s=b"b", extra=4),
    ]
    body = framed(*(e.SerializeToString() for e in examples))
    inputs = specs(spec("x", shape=(-1, 2)), spec("k", "DT_INT64"), spec("s", "DT_STRING"))
    request = decode_request(body, "application/x-tfexample", inputs)
    assert request.records == 2
    assert b"NaN" in request.body
    instances = doc(request)["instances"]
    assert instances[0] == {"x": [1.0, 2.0], "k": 7, "s": {"b64": "/w=="}}
    assert instances[1]["k"] == 8 and math.isnan(instances[1]["x"][1])
    arrays, _ = tf_serving_inputs(request, inputs)
    assert arrays["s"].tolist() == [b"\xff", b"b"] and arrays["k"].tolist() == [7, 8]


def test_tfexample_single_numeric_input_unnamed():
    record = make_example(x=[1.0, 2.0]).SerializeToString()
    request = decode_request(record, "application/x-tfexample", specs(spec("x", shape=(-1, 2))))
    assert doc(request) == {"instances": [[1.0, 2.0]]}
    request = decode_request(
        make_example(x=2.0).SerializeToString(), "application/x-tfexample", specs(spec("x"))
    )
    assert doc(request) == {"instances": [2.0]}  # rank-1 input: one value per instance


def test_tfexample_missing_feature_400():
    body = frame_tfrecord(make_example(x=1.0).SerializeToString()) + frame_tfrecord(
        make_example(y=1.0).SerializeToString()
    )
    err = decode_error(body, "application/x-tfexample", specs(spec("x"), spec("z")))
    assert err.status == 400
    assert "'z'" in err.message and "Record 0" in err.message


def test_tfexample_classify_and_regress_json():
    example = make_example(f=[0.1, 2.5], one=1.5, i=[1, 2], b=[b"a", b"\x00"], e=[])
    for method in ("classify", "regress"):
        request = decode_request(
            example.SerializeToString(), "application/x-tfexample", None, method
        )
        assert doc(request) == {
            "examples": [
                {
                    "f": [float(np.float32(0.1)), 2.5],
                    "one": 1.5,
                    "i": [1, 2],
                    "b": [{"b64": "YQ=="}, {"b64": "AA=="}],
                    "e": [],
                }
            ]
        }


def test_tfexample_bad_length_crc_is_bare_then_400():
    body = bytearray(framed(make_example(x=1.0, y=b"abc").SerializeToString()))
    body[8] ^= 0xFF  # the length CRC
    assert split_tfrecords(bytes(body)) is None
    err = decode_error(bytes(body), "application/x-tfexample", None)
    assert err.status == 400
    assert "Record 0" in err.message and "tf.train.Example" in err.message


def test_tfexample_corrupt_record_names_index():
    body = frame_tfrecord(make_example(x=1.0).SerializeToString()) + frame_tfrecord(b"\xff\xff")
    err = decode_error(body, "application/x-tfexample", None, "classify")
    assert err.status == 400 and "Record 1" in err.message


def test_tfexample_empty_400():
    assert decode_error(b"", "application/x-tfexample", None).status == 400
