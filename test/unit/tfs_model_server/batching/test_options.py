"""batching.options: TF Serving's batching defaults and its checks on BatchingParameters."""

from __future__ import annotations

import pytest

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.errors import Code, ServingError


def test_default_options_are_tfs_defaults() -> None:
    options = BatchingOptions()
    assert (options.max_batch_size, options.batch_timeout_micros) == (1000, 0)
    assert options.max_enqueued_batches == 10
    assert options.thread_pool_name == "model_server_batch_threads"
    assert options.execution_batch_size == 1000
    assert BatchingOptions(max_enqueued_batches=0).queue_capacity == 1
    assert BatchingOptions(allowed_batch_sizes=[1, 2], max_batch_size=2).allowed_batch_sizes == (
        1,
        2,
    )
    options.validate()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(num_batch_threads=0), "num_batch_threads must be positive; was 0"),
        (dict(max_batch_size=0), "input_batch_size_limit must be positive; was 0"),
        (dict(batch_timeout_micros=-1), "batch_timeout_micros must be non-negative; was -1"),
        (
            dict(max_enqueued_batches=0, enable_large_batch_splitting=True),
            "max_enqueued_batches must be positive; was 0",
        ),
        (
            dict(max_batch_size=8, allowed_batch_sizes=(2, 4)),
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; "
            "expected 8",
        ),
        (
            dict(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=16),
            "When enable_large_batch_splitting is true, input_batch_size_limit must be greater "
            "than or equal to max_execution_batch_size.1816",
        ),
    ],
)
def test_options_validation(options, message) -> None:
    with pytest.raises(ServingError) as e:
        BatchingOptions(**options).validate()
    assert (e.value.code, e.value.message) == (Code.INVALID_ARGUMENT, message)
