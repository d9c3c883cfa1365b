"""sagemaker_serving.formats.csv_rows: text/csv bodies as TF Serving REST requests."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format_helpers import assert_400_naming, decode_error, doc, spec, specs, tf_serving_inputs
from sagemaker_serving.formats.request import decode_request


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
    assert "line 3" in decode_error(b"a,b\n1,2\n3\n", "text/csv;header=present", None).message


def test_csv_nonfinite():
    request = decode_request(b'NaN,Infinity,-Infinity,inf,-inf,nan,"NaN"\n', "text/csv", None)
    assert b"NaN,Infinity,-Infinity,Infinity,-Infinity,NaN" in request.body
    (row,) = doc(request)["instances"]
    assert math.isnan(row[0]) and row[1:3] == [math.inf, -math.inf] and row[6] == "NaN"


def test_csv_width_mismatch_names_line():
    assert_400_naming(b"1,2\n3,4\n\n5\n", "text/csv", "line 4")


def test_csv_width_mismatch_after_multiline_field():
    assert_400_naming(b'1,"a\nb"\n3,4,5\n', "text/csv", "line 3")


@pytest.mark.parametrize("body", [b"", b"\n\n", b"\xff\xfe,1"])
def test_csv_empty_or_undecodable_400(body):
    assert decode_error(body, "text/csv", None).status == 400


def test_csv_charset():
    assert decode_error("é,1".encode("latin-1"), "text/csv", None).status == 400  # utf-8 by default
    request = decode_request("é,1".encode("latin-1"), "text/csv; charset=latin-1", None)
    assert doc(request)["instances"] == [["é", 1]]
    assert decode_error(b"1", "text/csv; charset=nope", None).status == 415


def test_csv_accepted_by_tf_serving():
    request = decode_request(b"1.5,2\n3,4\n", "text/csv", None)
    arrays, _ = tf_serving_inputs(request, specs(spec("x")))
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
    rows = [[v.replace("\r", "").replace("\x00", "") for v in row] for row in rows]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    assert csv_instances(out.getvalue().encode()) == rows


@pytest.mark.parametrize(
    "field",
    [b"1" * (256 * 1024), b"-" + b"9" * 4301, b"1e999", b"-1e" + b"9" * 5000, b"1" * 400 + b".5"],
)
def test_csv_numbers_beyond_a_double_are_400(field):
    """A field of digits longer than int() reads, or any number beyond a double, is a 400
    naming the field, as the fast path's model server refuses it: never a 500, never null."""
    assert_400_naming(b"1.0\n" + field + b"\n", "text/csv", "line 2, field 1: number too big")
    assert_400_naming(b"1," + field + b"\n", "text/csv", "line 1, field 2: number too big")


def test_csv_integers_beyond_64_bits_keep_their_digits():
    """Up to int()'s 4300 digits an integer goes on as written (the model server reads it as
    a double, or refuses it beyond one, as on the fast path)."""
    digits = "1" * 400
    request = decode_request(digits.encode() + b"\n", "text/csv", None)
    assert request.body == b'{"instances":[' + digits.encode() + b"]}"
