"""DataProcessing JSONPath subset, joins and the CSV/JSON record codecs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfs_batch_transform.data_processing import (
    DataProcessing,
    JsonPathError,
    RecordCodec,
    compile_path,
    join,
)

DOC = {"id": 7, "features": [1, 2, 3], "meta": {"a": 1, "b": [4, 5]}}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", DOC),
        ("$.id", 7),
        ("$['id']", 7),
        ('$["id"]', 7),
        ("$.features[0]", 1),
        ("$.features[-1]", 3),
        ("$.features[0,2]", [1, 3]),
        ("$.features[1:]", [2, 3]),
        ("$.features[:2]", [1, 2]),
        ("$.features[-2:]", [2, 3]),
        ("$.features[*]", [1, 2, 3]),
        ("$.meta.*", [1, [4, 5]]),
        ("$['id','features']", {"id": 7, "features": [1, 2, 3]}),
        ("$.meta.['a','b']", {"a": 1, "b": [4, 5]}),
        ("$.meta.b[1]", 5),
        ("$.*", [7, [1, 2, 3], {"a": 1, "b": [4, 5]}]),
    ],
)
def test_json_paths(path, expected):
    assert compile_path(path).apply(DOC) == expected


def test_csv_row_paths():
    row = ["id1", "1.0", "2.0", "3.0", "4.0", "5.0"]
    assert compile_path("$[1:]").apply(row) == row[1:]
    assert compile_path("$[0,-1]").apply(row) == ["id1", "5.0"]
    # slices are end-exclusive (JsonPath, Array.slice); see the module docstring
    assert compile_path("$[1:4]").apply(row) == ["1.0", "2.0", "3.0"]


@given(st.lists(st.integers(), max_size=8), st.integers(-10, 10), st.integers(-10, 10))
def test_slices_match_python(items, start, stop):
    assert compile_path(f"$[{start}:{stop}]").apply(items) == items[start:stop]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("id", "must start with '\\$'"),
        ("$..id", "unsupported syntax"),
        ("$[?(@.x)]", "unsupported bracket"),
        ("$['a.b','c']", "nested names"),
        ("$." + "a" * 70, "at most 63"),
    ],
)
def test_unsupported_paths_are_rejected(path, message):
    with pytest.raises(JsonPathError, match=message):
        compile_path(path)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("$.missing", "no key 'missing'"),
        ("$.features[3]", "index 3 out of range"),
        ("$.features[-4]", "index -4 out of range"),
        ("$.id[0]", "applies to a JSON list, not int"),
        ("$['id','nope']", "no key 'nope'"),
    ],
)
def test_paths_that_do_not_apply_fail(path, message):
    with pytest.raises(JsonPathError, match=message):
        compile_path(path).apply(DOC)


def test_join_json_object_adds_sagemaker_output():
    assert join({"x": 1}, {"y": 2}, csv_rows=False) == {"x": 1, "SageMakerOutput": {"y": 2}}
    # the reserved name is overwritten
    assert join({"SageMakerOutput": 0}, 5, csv_rows=False) == {"SageMakerOutput": 5}


def test_join_json_non_object_wraps_input():
    assert join([1, 2], 3.5, csv_rows=False) == {"SageMakerInput": [1, 2], "SageMakerOutput": 3.5}


def test_join_csv_appends_fields():
    assert join(["1", "2", "3"], ["1"], csv_rows=True) == ["1", "2", "3", "1"]


def test_csv_codec_round_trips_rfc4180_quoting():
    codec = RecordCodec("text/csv; charset=utf-8")
    row = codec.parse(b'a,"b,c","say ""hi"""')
    assert row == ["a", "b,c", 'say "hi"']
    assert codec.dump(row) == b'a,"b,c","say ""hi"""'
    assert codec.dump("x") == b"x"


def test_codec_rejects_binary_types():
    with pytest.raises(ValueError, match="only JSON, JSON Lines and CSV"):
        RecordCodec("application/x-image")


def test_default_processing_is_inactive_for_any_content_type():
    dp = DataProcessing.create("$", "$", "None", "application/x-image")
    assert dp.codec is None and not dp.filters_input and not dp.processes_output
    assert dp.request_record(b"\xff\xd8") == b"\xff\xd8"


def test_output_filter_without_join_filters_the_prediction():
    dp = DataProcessing.create("$", "$.classes", "None", "application/jsonlines")
    assert dp.processes_output and not dp.filters_input
    assert dp.output_record(b'{"x":1}\n', b'{"classes":3,"p":[0.1]}') == b"3"


def test_json_filter_then_join_then_output_filter():
    dp = DataProcessing.create(
        "$.features", "$['id','SageMakerOutput']", "Input", "application/json"
    )
    record = b'{"id":"r1","features":[1,2]}\n'
    assert dp.request_record(record) == b"[1,2]\n"
    assert dp.output_record(record, b"[3.5,4.0]") == b'{"id":"r1","SageMakerOutput":[3.5,4.0]}'
