"""tfs_batch_transform.packing: mini-batches (BatchStrategy, MaxPayloadInMB)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemaker_serving.config.batch_parameters import MIB
from tfs_batch_transform.packing import (
    Batch,
    PayloadTooLarge,
    pack,
    payload_limit_bytes,
)


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
