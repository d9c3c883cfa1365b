"""tfs_batch_transform.assembly: one input object's plan (record bodies per mini-batch, framing
kept or dropped, DataProcessing) and the output assembled from the responses."""

from __future__ import annotations

import pytest

from sagemaker_serving.formats.tfrecord import frame_tfrecord
from tfs_batch_transform.assembly import AssemblyError, FilePlan
from tfs_batch_transform.data_processing import DataProcessing
from tfs_batch_transform.packing import PayloadTooLarge

NO_PROCESSING = DataProcessing.create("$", "$", "None", "")


def _plan(
    data: bytes, split: str, strategy: str, limit: int | None = None, assemble="None", dp=None
):
    return FilePlan(data, split, strategy, limit, assemble, dp or NO_PROCESSING)


def test_multi_record_bodies_keep_framing_single_record_bodies_drop_it():
    data = b"".join(frame_tfrecord(p) for p in (b"a", b"bb", b"ccc"))
    multi = _plan(data, "TFRecord", "MultiRecord", 40)
    assert [multi.body(b) for b in multi.batches] == [
        frame_tfrecord(b"a") + frame_tfrecord(b"bb"),
        frame_tfrecord(b"ccc"),
    ]
    single = _plan(data, "TFRecord", "SingleRecord", 40)
    assert [single.body(b) for b in single.batches] == [b"a", b"bb", b"ccc"]


def test_split_none_ignores_the_strategy_but_not_the_limit():
    plan = _plan(b"1\n2\n", "None", "MultiRecord", 100)
    assert [plan.body(b) for b in plan.batches] == [b"1\n2\n"]
    with pytest.raises(PayloadTooLarge):
        _plan(b"x" * 101, "None", "MultiRecord", 100)


def test_assemble_line_adds_a_newline_per_response_unless_present():
    plan = _plan(b"1\n2\n3\n", "Line", "SingleRecord", assemble="Line")
    assert plan.assemble([b"a", b"b\n", b""]) == b"a\nb\n\n"
    plan = _plan(b"1\n2\n3\n", "Line", "SingleRecord", assemble="None")
    assert plan.assemble([b"a", b"b\n", b"c"]) == b"ab\nc"


def test_join_needs_one_output_line_per_record():
    dp = DataProcessing.create("$", "$", "Input", "application/jsonlines")
    plan = _plan(b'{"x":1}\n{"x":2}\n', "Line", "MultiRecord", assemble="Line", dp=dp)
    assert plan.assemble([b"3.5\n4.0\n"]) == (
        b'{"x":1,"SageMakerOutput":3.5}\n{"x":2,"SageMakerOutput":4.0}\n'
    )
    with pytest.raises(AssemblyError, match="1 lines for 2 records"):
        plan.assemble([b'{"predictions":[3.5,4.0]}'])


def test_input_filter_rewrites_bodies_and_join_uses_the_original_record():
    dp = DataProcessing.create("$[1:]", "$[0,-1]", "Input", "text/csv")
    plan = _plan(b"id1,1.0,2.0\nid2,3.0,4.0\n", "Line", "MultiRecord", assemble="Line", dp=dp)
    assert [plan.body(b) for b in plan.batches] == [b"1.0,2.0\n3.0,4.0\n"]
    assert plan.assemble([b"3.5\n4.5\n"]) == b"id1,3.5\nid2,4.5\n"


def test_input_filter_error_names_the_record():
    dp = DataProcessing.create("$.features", "$", "None", "application/jsonlines")
    with pytest.raises(AssemblyError, match="record 1: input filter: no key 'features'"):
        _plan(b'{"features":[1]}\n{"id":2}\n', "Line", "SingleRecord", dp=dp)
