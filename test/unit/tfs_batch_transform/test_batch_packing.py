"""Mini-batches (BatchStrategy, MaxPayloadInMB), parameter precedence and file plans."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfs_batch_transform.assembly import AssemblyError, FilePlan
from tfs_batch_transform.data_processing import DataProcessing
from tfs_batch_transform.framing import frame_tfrecord
from tfs_batch_transform.packing import (
    MIB,
    Batch,
    PayloadTooLarge,
    pack,
    payload_limit_bytes,
)
from tfs_batch_transform.parameters import resolve


def test_single_record_is_one_per_batch():
    assert pack([5, 1, 9], "SingleRecord", 6 * MIB) == [Batch(0, 1), Batch(1, 2), Batch(2, 3)]


def test_multi_record_packs_whole_records_up_to_the_limit():
    assert pack([4, 4, 2, 9, 1], "MultiRecord", 10) == [Batch(0, 3), Batch(3, 5)]
    assert pack([4, 4, 3, 9, 2], "MultiRecord", 10) == [
        Batch(0, 2),
        Batch(2, 3),
        Batch(3, 4),
        Batch(4, 5),
    ]


def test_multi_record_without_limit_is_one_batch():
    assert pack([4] * 1000, "MultiRecord", None) == [Batch(0, 1000)]


def test_record_over_the_limit_fails():
    with pytest.raises(PayloadTooLarge, match="record 1 is 11 bytes"):
        pack([1, 11], "MultiRecord", 10)
    with pytest.raises(PayloadTooLarge):
        pack([11], "SingleRecord", 10)


@given(
    st.lists(st.integers(0, 50), max_size=60),
    st.integers(50, 200),
    st.sampled_from(["SingleRecord", "MultiRecord"]),
)
def test_batches_cover_records_in_order_within_the_limit(sizes, limit, strategy):
    batches = pack(sizes, strategy, limit)
    assert [i for b in batches for i in range(b.start, b.stop)] == list(range(len(sizes)))
    assert all(sum(sizes[b.start : b.stop]) <= limit for b in batches)
    if strategy == "MultiRecord":  # greedy: the next record would not have fitted
        for first, second in itertools.pairwise(batches):
            assert sum(sizes[first.start : first.stop]) + sizes[second.start] > limit


def test_payload_limit_is_mib_and_zero_is_unlimited():
    assert payload_limit_bytes(6) == 6 * 1024 * 1024
    assert payload_limit_bytes(0) is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        payload_limit_bytes(101)


def test_parameters_job_over_container_over_defaults():
    container = {
        "MaxConcurrentTransforms": 8,
        "BatchStrategy": "SINGLE_RECORD",
        "MaxPayloadInMB": 3,
    }
    p = resolve(2, None, None, container)
    assert (p.max_concurrent_transforms, p.batch_strategy, p.max_payload_in_mb) == (
        2,
        "SingleRecord",
        3,
    )
    assert p.sources == {
        "MaxConcurrentTransforms": "job",
        "BatchStrategy": "execution-parameters",
        "MaxPayloadInMB": "execution-parameters",
    }
    d = resolve(None, None, None, {})
    assert (d.max_concurrent_transforms, d.batch_strategy, d.max_payload_in_mb) == (
        1,
        "MultiRecord",
        6,
    )
    assert set(d.sources.values()) == {"default"}


def test_parameters_ignore_bad_container_values_and_zero_concurrency():
    bad = {"MaxConcurrentTransforms": 0, "BatchStrategy": "ALL", "MaxPayloadInMB": 500}
    p = resolve(0, None, None, bad)
    assert (p.max_concurrent_transforms, p.batch_strategy, p.max_payload_in_mb) == (
        1,
        "MultiRecord",
        6,
    )


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
