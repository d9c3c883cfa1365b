"""Unit tests of sagemaker_serving.formats.payloads: client payloads <-> TF Serving REST JSON.

Generated request bodies are also fed to tfs_model_server.codec (the TF Serving JSON
parser emulation) to check that TF Serving would accept them as meant.
"""

from __future__ import annotations

import base64
import io
import json
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2

from sagemaker_serving.formats.payloads import (
    BUILTIN_TYPES,
    InputSpec,
    ModelRequest,
    PayloadError,
    decode_request,
    frame_tfrecord,
    media_type,
    signature_inputs,
    split_tfrecords,
)
from tfs_model_server.codec.example_request import classify_regress_request
from tfs_model_server.codec.json_reader import loads
from tfs_model_server.codec.predict_request import predict_inputs
from tfs_model_server.core.tensor_spec import TensorSpec


def doc(request: ModelRequest) -> dict:
    """The request body parsed, NaN/Infinity allowed."""
    return json.loads(request.body)


def spec(name: str, dtype: str = "DT_FLOAT", shape: tuple[int, ...] | None = (-1,)) -> InputSpec:
    return InputSpec(name, dtype, shape)


def specs(*items: InputSpec) -> dict[str, InputSpec]:
    return {item.name: item for item in items}


def tfs_specs(inputs: dict[str, InputSpec]) -> dict[str, TensorSpec]:
    return {
        name: TensorSpec(name, f"{name}:0", types_pb2.DataType.Value(s.dtype), None)
        for name, s in inputs.items()
    }


def error(*args, **kwargs) -> PayloadError:
    with pytest.raises(PayloadError) as info:
        decode_request(*args, **kwargs)
    return info.value


def make_example(**features) -> example_pb2.Example:
    """Example from keyword features: bytes -> bytes_list, float -> float_list, int -> int64."""
    example = example_pb2.Example()
    for name, values in features.items():
        values = values if isinstance(values, list) else [values]
        feature = example.features.feature[name]
        if values and isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif values and isinstance(values[0], float):
            feature.float_list.value.extend(values)
        else:
            feature.int64_list.value.extend(values)
    return example


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


# ------------------------------------------------------------------------- basics


def test_payload_error_fields():
    err = PayloadError(415, "nope")
    assert isinstance(err, ValueError)
    assert (err.status, err.message, str(err)) == (415, "nope", "nope")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, ""),
        ("", ""),
        ("Application/JSON; charset=UTF-8", "application/json"),
        ("  text/csv ", "text/csv"),
        ("text/csv;header=present", "text/csv"),
    ],
)
def test_media_type(header, expected):
    assert media_type(header) == expected


def test_builtin_types():
    assert {
        "application/json",
        "application/jsonlines",
        "application/jsons",
        "application/x-jsonlines",
        "application/json-lines",
        "application/x-ndjson",
        "application/ndjson",
        "application/x-www-form-urlencoded",
        "text/csv",
        "application/x-image",
        "application/octet-stream",
        "application/x-npy",
        "application/x-tfexample",
        "application/tfrecord",
        "application/x-tfrecord",
    } == BUILTIN_TYPES


@pytest.mark.parametrize("ctype", ["image/png", "application/xml", "", "text/plain"])
def test_unsupported_media_type_415(ctype):
    err = error(b"x", ctype, None)
    assert err.status == 415
    assert err.message.startswith("Unsupported Media Type: ")


def test_unknown_method_400():
    assert error(b"[1]", "application/json", None, method="explain").status == 400


# ------------------------------------------------------------------ signature_inputs

METADATA = {
    "model_spec": {"name": "m", "version": "1"},
    "metadata": {
        "signature_def": {
            "signature_def": {
                "serving_default": {
                    "inputs": {
                        "image_bytes": {
                            "dtype": "DT_STRING",
                            "tensor_shape": {"dim": [{"size": "-1"}], "unknown_rank": False},
                            "name": "serving_default_image_bytes:0",
                        },
                        "scale": {
                            "dtype": "DT_FLOAT",
                            "tensor_shape": {"dim": [{"size": -1}, {"size": "3"}]},
                            "name": "scale:0",
                        },
                        "anything": {"dtype": "DT_INT64", "tensor_shape": {"unknown_rank": True}},
                        "scalar": {"dtype": "DT_INT32", "tensor_shape": {}},
                    },
                    "outputs": {},
                    "method_name": "tensorflow/serving/predict",
                },
                "regress_x": {"inputs": {}, "outputs": {}},
            }
        }
    },
}


def test_signature_inputs():
    inputs = signature_inputs(METADATA)
    assert inputs == {
        "image_bytes": InputSpec("image_bytes", "DT_STRING", (-1,)),
        "scale": InputSpec("scale", "DT_FLOAT", (-1, 3)),
        "anything": InputSpec("anything", "DT_INT64", None),
        "scalar": InputSpec("scalar", "DT_INT32", ()),
    }
    assert signature_inputs(METADATA, "regress_x") == {}


def test_signature_inputs_missing_signature_400():
    with pytest.raises(PayloadError) as info:
        signature_inputs(METADATA, "nope")
    assert info.value.status == 400
    assert '"nope"' in info.value.message
    assert "regress_x, serving_default" in info.value.message


def test_signature_inputs_bad_metadata():
    with pytest.raises(ValueError):
        signature_inputs({"error": "x"})


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
    classify_regress_request(loads(request.body))


@pytest.mark.parametrize("body", [b"{", b"[1, 2", b"nan", b"{'a': 1}", b"[1]\n[2"])
def test_json_malformed_400(body):
    err = error(body, "application/json", None)
    assert err.status == 400
    assert err.message.startswith("Malformed JSON")


@pytest.mark.parametrize("body", [b"", b"   ", b"\xef\xbb\xbf\n"])
def test_json_empty_400(body):
    err = error(body, "application/json", None)
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


@pytest.mark.parametrize(
    "ctype",
    [
        "application/jsonlines",
        "application/jsons",
        "application/x-jsonlines",
        "application/json-lines",
        "application/x-ndjson",
        "application/ndjson",
    ],
)
def test_json_lines(ctype):
    body = b'[1, 2]\r\n\n{"instances": [3]}\n"s"\n4.5'
    request = decode_request(body, ctype + "; charset=utf-8", None)
    assert request.records == 4
    assert doc(request) == {"instances": [[1, 2], {"instances": [3]}, "s", 4.5]}


def test_json_lines_bad_line_names_number():
    err = error(b"[1]\n\n[2\n[3]", "application/jsonlines", None)
    assert err.status == 400
    assert "line 3" in err.message


def test_json_lines_empty_400():
    err = error(b"\n \n", "application/jsonlines", None)
    assert (err.status, err.message) == (400, "Empty request body: expected JSON Lines")


def test_json_lines_one_tf_serving_request_passes_through():
    request = decode_request(b'\n{"instances": [1, 2]}\n', "application/x-ndjson", None)
    assert (request.body, request.records) == (b'{"instances": [1, 2]}', 2)


def test_json_lines_regress():
    request = decode_request(b'{"x": 1.0}\n{"x": 2.0}\n', "application/jsonlines", None, "regress")
    assert doc(request) == {"examples": [{"x": 1.0}, {"x": 2.0}]}


def test_json_lines_accepted_by_tf_serving():
    request = decode_request(b"[1.0, 2.0]\n[3.0, NaN]", "application/jsonlines", None)
    arrays, row_format = predict_inputs(loads(request.body), tfs_specs(specs(spec("x"))))
    assert row_format and arrays["x"].shape == (2, 2) and np.isnan(arrays["x"][1, 1])


# ------------------------------------------------------------------------------- CSV


def csv_instances(body: bytes, **kwargs) -> list:
    request = decode_request(body, "text/csv", None, **kwargs)
    return json.loads(request.body)["instances"]


def test_csv_numbers_and_strings():
    body = b'1,2.5,-3e2,abc,"4"\r\n+7,.5,1.,"x,y",007\r\n'
    assert csv_instances(body) == [[1, 2.5, -300.0, "abc", "4"], [7, 0.5, 1.0, "x,y", 7]]


def test_csv_types_are_exact():
    (row,) = csv_instances(b"1,1.0,1e0")
    assert [type(v) for v in row] == [int, float, float]


def test_csv_single_column_is_scalar():
    request = decode_request(b"1\n2.5\n\nx\n", "text/csv", None)
    assert request.records == 3
    assert doc(request) == {"instances": [1, 2.5, "x"]}


def test_csv_quoting_rfc4180():
    body = b'"a ""quoted"" word","multi\nline",3\n"",,"-1"\n'
    request = decode_request(body, "text/csv; charset=utf-8", None)
    assert request.records == 2
    assert doc(request)["instances"] == [['a "quoted" word', "multi\nline", 3], ["", "", "-1"]]


def test_csv_header_present_is_skipped():
    request = decode_request(b"a,b\n1,2\n3,4\n", "text/csv; header=present", None)
    assert (doc(request), request.records) == ({"instances": [[1, 2], [3, 4]]}, 2)
    assert "line 3" in error(b"a,b\n1,2\n3\n", "text/csv;header=present", None).message


def test_csv_nonfinite():
    request = decode_request(b'NaN,Infinity,-Infinity,inf,-inf,nan,"NaN"\n', "text/csv", None)
    assert b"NaN,Infinity,-Infinity,Infinity,-Infinity,NaN" in request.body
    (row,) = doc(request)["instances"]
    assert math.isnan(row[0]) and row[1:3] == [math.inf, -math.inf] and row[6] == "NaN"


def test_csv_width_mismatch_names_line():
    err = error(b"1,2\n3,4\n\n5\n", "text/csv", None)
    assert err.status == 400
    assert "line 4" in err.message


def test_csv_width_mismatch_after_multiline_field():
    err = error(b'1,"a\nb"\n3,4,5\n', "text/csv", None)
    assert "line 3" in err.message


@pytest.mark.parametrize("body", [b"", b"\n\n", b"\xff\xfe,1"])
def test_csv_empty_or_undecodable_400(body):
    assert error(body, "text/csv", None).status == 400


def test_csv_charset():
    assert error("é,1".encode("latin-1"), "text/csv", None).status == 400  # utf-8 by default
    request = decode_request("é,1".encode("latin-1"), "text/csv; charset=latin-1", None)
    assert doc(request)["instances"] == [["é", 1]]
    assert error(b"1", "text/csv; charset=nope", None).status == 415


def test_csv_accepted_by_tf_serving():
    request = decode_request(b"1.5,2\n3,4\n", "text/csv", None)
    arrays, _ = predict_inputs(loads(request.body), tfs_specs(specs(spec("x"))))
    assert arrays["x"].tolist() == [[1.5, 2.0], [3.0, 4.0]]


finite_floats = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.integers(), finite_floats), min_size=3, max_size=3),
        min_size=1,
        max_size=5,
    )
)
def test_csv_numbers_round_trip(rows):
    body = "\n".join(",".join(repr(v) for v in row) for row in rows).encode()
    assert csv_instances(body) == rows
    for got, want in zip(csv_instances(body), rows, strict=True):
        assert [type(v) for v in got] == [type(v) for v in want]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text(), min_size=2, max_size=2), min_size=1, max_size=4))
def test_csv_quoted_strings_round_trip(rows):
    """csv.writer(QUOTE_ALL) output reads back as the same strings, numbers-looking or not."""
    import csv

    rows = [[v.replace("\r", "").replace("\x00", "") for v in row] for row in rows]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    assert csv_instances(out.getvalue().encode()) == rows


# ------------------------------------------------------------------------- raw bytes

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
    err = error(IMAGE, "application/x-image", inputs)
    assert err.status == 415
    assert "inference.py" in err.message


def test_bytes_empty_400():
    assert error(b"", "application/octet-stream", None).status == 400


def test_bytes_accepted_by_tf_serving():
    inputs = specs(spec("image", "DT_STRING"))
    request = decode_request(IMAGE, "application/x-image", inputs)
    arrays, _ = predict_inputs(loads(request.body), tfs_specs(inputs))
    assert arrays["image"].tolist() == [IMAGE]


# ------------------------------------------------------------------------------- NPY


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
    arrays, _ = predict_inputs(loads(request.body), tfs_specs(specs(spec("x", "DT_INT64"))))
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
    assert error(body, "application/x-npy", None).status == 400


def corrupt_npz() -> bytes:
    """A .npz whose member's data no longer matches its CRC-32."""
    out = io.BytesIO()
    np.savez(out, x=np.arange(8.0))
    body = bytearray(out.getvalue())
    body[60:80] = b"\xff" * 20
    return bytes(body)


def bad_code_point_npy(code_point: int) -> bytes:
    """A `<U1` array holding a code point no str can hold (or a lone surrogate)."""
    body = bytearray(npy(np.array(["a"], dtype="<U1")))
    body[-4:] = code_point.to_bytes(4, "little")
    return bytes(body)


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (corrupt_npz(), "application/x-npy"),
        (bad_code_point_npy(0x110000), "application/x-npy"),
        (bad_code_point_npy(0xD800), "application/x-npy"),
        (DEEP_JSON, "application/json"),
        (DEEP_JSON + b"\n" + DEEP_JSON, "application/json"),
        (DEEP_JSON, "application/jsonlines"),
    ],
)
def test_whatever_a_decoder_raises_on_client_bytes_is_400(body, content_type):
    err = error(body, content_type, specs(spec("x")))
    assert err.status == 400, err.message


def test_npy_pickle_refused_400():
    out = io.BytesIO()
    np.save(out, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert error(out.getvalue(), "application/x-npy", None).status == 400


def test_npy_complex_400():
    assert error(npy(np.array([1j])), "application/x-npy", None).status == 400


# -------------------------------------------------------------------------- TFRecord


def test_frame_tfrecord_matches_tensorflow(tmp_path):
    import tensorflow as tf

    records = [make_example(x=1.5).SerializeToString(), b"", b"\x00" * 300]
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        assert f.read() == b"".join(map(frame_tfrecord, records))
    assert split_tfrecords(b"".join(map(frame_tfrecord, records))) == records


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=6))
def test_tfrecord_round_trip(records):
    assert split_tfrecords(b"".join(frame_tfrecord(r) for r in records)) == records


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
    body = b"".join(frame_tfrecord(e.SerializeToString()) for e in examples)
    request = decode_request(body, "application/x-tfexample", None, "classify")
    assert request.records == len(examples)
    _, serialized, _ = classify_regress_request(loads(request.body))
    for want, got in zip(examples, serialized, strict=True):
        got = example_pb2.Example.FromString(got)
        for name in ("i", "b"):
            assert got.features.feature[name] == want.features.feature[name]
        assert list(got.features.feature["f"].float_list.value) == list(
            want.features.feature["f"].float_list.value
        )


def test_split_tfrecords_not_framed():
    bare = make_example(x=1.5).SerializeToString()
    assert split_tfrecords(bare) is None
    assert split_tfrecords(b"") is None
    framed = frame_tfrecord(bare)
    assert split_tfrecords(framed + b"\x00") is None  # not exactly to the end
    assert split_tfrecords(framed[:-1]) is None


def test_split_tfrecords_bad_data_crc_400():
    framed = bytearray(frame_tfrecord(b"abc") + frame_tfrecord(b"def"))
    framed[-5] ^= 0xFF  # last data byte of record 1
    with pytest.raises(PayloadError) as info:
        split_tfrecords(bytes(framed))
    assert info.value.status == 400 and "record 1" in info.value.message


def test_tfexample_bare_predict_serialized_input():
    record = make_example(x=[1.0, 2.0], name=b"n").SerializeToString()
    for ctype in ("application/x-tfexample", "application/tfrecord", "application/x-tfrecord"):
        for inputs in (None, specs(spec("examples", "DT_STRING"))):
            request = decode_request(record, ctype, inputs)
            assert request.records == 1
            assert doc(request) == {"instances": [{"b64": base64.b64encode(record).decode()}]}


def test_tfexample_framed_predict_serialized_input():
    records = [make_example(x=float(i)).SerializeToString() for i in range(3)]
    body = b"".join(map(frame_tfrecord, records))
    inputs = specs(spec("inputs", "DT_STRING"))
    request = decode_request(body, "application/x-tfexample", inputs)
    assert request.records == 3
    arrays, _ = predict_inputs(loads(request.body), tfs_specs(inputs))
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
    body = b"".join(frame_tfrecord(e.SerializeToString()) for e in examples)
    inputs = specs(spec("x", shape=(-1, 2)), spec("k", "DT_INT64"), spec("s", "DT_STRING"))
    request = decode_request(body, "application/x-tfexample", inputs)
    assert request.records == 2
    assert b"NaN" in request.body
    instances = doc(request)["instances"]
    assert instances[0] == {"x": [1.0, 2.0], "k": 7, "s": {"b64": "/w=="}}
    assert instances[1]["k"] == 8 and math.isnan(instances[1]["x"][1])
    arrays, _ = predict_inputs(loads(request.body), tfs_specs(inputs))
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
    err = error(body, "application/x-tfexample", specs(spec("x"), spec("z")))
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
    framed = bytearray(frame_tfrecord(make_example(x=1.0, y=b"abc").SerializeToString()))
    framed[8] ^= 0xFF  # the length CRC
    assert split_tfrecords(bytes(framed)) is None
    err = error(bytes(framed), "application/x-tfexample", None)
    assert err.status == 400
    assert "Record 0" in err.message and "tf.train.Example" in err.message


def test_tfexample_corrupt_record_names_index():
    body = frame_tfrecord(make_example(x=1.0).SerializeToString()) + frame_tfrecord(b"\xff\xff")
    err = error(body, "application/x-tfexample", None, "classify")
    assert err.status == 400 and "Record 1" in err.message


def test_tfexample_empty_400():
    assert error(b"", "application/x-tfexample", None).status == 400


def test_frame_layout():
    framed = frame_tfrecord(b"hello")
    assert struct.unpack("<Q", framed[:8]) == (5,)
    assert framed[12:17] == b"hello" and len(framed) == 21
