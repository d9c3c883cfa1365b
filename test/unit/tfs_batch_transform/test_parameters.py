"""tfs_batch_transform.parameters: the job's values over the container's over the defaults."""

from __future__ import annotations

from tfs_batch_transform.parameters import resolve


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
