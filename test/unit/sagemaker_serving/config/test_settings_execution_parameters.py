"""Settings.execution_parameters: the answer to GET /execution-parameters."""

from __future__ import annotations

import json

import pytest

from sagemaker_serving.config.settings import Settings


def params(cpu_count: int = 4, **env: str) -> dict:
    return Settings.from_env(env, cpu_count=cpu_count).execution_parameters()


def test_defaults():
    result = params(cpu_count=4)
    assert result == {
        "MaxConcurrentTransforms": 4,
        "BatchStrategy": "MULTI_RECORD",
        "MaxPayloadInMB": 6,
    }
    assert list(json.loads(json.dumps(result))) == [
        "MaxConcurrentTransforms",
        "BatchStrategy",
        "MaxPayloadInMB",
    ]


def test_concurrency_scales_with_instances():
    assert params(cpu_count=3, SAGEMAKER_TFS_INSTANCE_COUNT="2")["MaxConcurrentTransforms"] == 6


def test_concurrency_capped_by_total_payload():
    result = params(cpu_count=64)
    assert result["MaxConcurrentTransforms"] == 16  # 16 x 6 MB <= 100 MB
    assert result["MaxConcurrentTransforms"] * result["MaxPayloadInMB"] <= 100


@pytest.mark.parametrize(("payload", "expected"), [("50", 2), ("100", 1), ("34", 2), ("1", 64)])
def test_cap_uses_the_configured_payload(payload, expected):
    result = params(cpu_count=64, SAGEMAKER_MAX_PAYLOAD_IN_MB=payload)
    assert result["MaxPayloadInMB"] == int(payload)
    assert result["MaxConcurrentTransforms"] == expected


def test_unlimited_payload_keeps_zero_and_is_not_capped():
    result = params(cpu_count=64, SAGEMAKER_MAX_PAYLOAD_IN_MB="0")
    assert result["MaxPayloadInMB"] == 0
    assert result["MaxConcurrentTransforms"] == 64


def test_explicit_values_override():
    result = params(
        cpu_count=64,
        SAGEMAKER_MAX_CONCURRENT_TRANSFORMS="30",
        SAGEMAKER_BATCH_STRATEGY="SingleRecord",
        SAGEMAKER_MAX_PAYLOAD_IN_MB="2",
    )
    assert result == {
        "MaxConcurrentTransforms": 30,
        "BatchStrategy": "SINGLE_RECORD",
        "MaxPayloadInMB": 2,
    }
