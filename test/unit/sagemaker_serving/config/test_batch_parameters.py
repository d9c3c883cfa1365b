"""sagemaker_serving.config.batch_parameters: BatchStrategy in both spellings and MaxPayloadInMB,
one home for the container and the local Batch Transform runner."""

from __future__ import annotations

import pytest

from sagemaker_serving.config import batch_parameters as bp
from sagemaker_serving.config.settings import Settings
from tfs_batch_transform import packing, parameters


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("MultiRecord", "MultiRecord"),
        ("SingleRecord", "SingleRecord"),
        ("MULTI_RECORD", "MultiRecord"),
        ("single_record", "SingleRecord"),
    ],
)
def test_either_spelling_is_the_api_s_name(value: str, name: str):
    assert bp.strategy_name(value) == name


@pytest.mark.parametrize("value", ["multirecord", "Multi", ""])
def test_other_spellings_are_refused(value: str):
    with pytest.raises(ValueError, match="SingleRecord or MultiRecord"):
        bp.strategy_name(value)


def test_the_container_and_the_runner_use_the_same_rules():
    answer = Settings.from_env({}).execution_parameters()
    assert answer["BatchStrategy"] == bp.CONTAINER_SPELLING[bp.DEFAULT_BATCH_STRATEGY]
    assert answer["MaxPayloadInMB"] == bp.DEFAULT_MAX_PAYLOAD_IN_MB
    resolved = parameters.resolve(None, None, None, answer)
    assert resolved.batch_strategy == bp.DEFAULT_BATCH_STRATEGY
    assert resolved.max_payload_in_mb == bp.DEFAULT_MAX_PAYLOAD_IN_MB
    assert packing.payload_limit_bytes(bp.MAX_PAYLOAD_IN_MB) == bp.MAX_PAYLOAD_IN_MB * bp.MIB
    with pytest.raises(ValueError):
        packing.payload_limit_bytes(bp.MAX_PAYLOAD_IN_MB + 1)
