"""The answer to GET /execution-parameters: SageMaker Batch Transform asks it before a job for
MaxConcurrentTransforms, BatchStrategy and MaxPayloadInMB, where the job does not set them."""

from __future__ import annotations

from sagemaker_serving.config.batch_parameters import (
    CONTAINER_SPELLING,
    DEFAULT_BATCH_STRATEGY,
    DEFAULT_MAX_PAYLOAD_IN_MB,
    MAX_TOTAL_PAYLOAD_IN_MB,
)
from sagemaker_serving.config.settings import Settings


def execution_parameters(settings: Settings) -> dict[str, int | str]:
    """MaxConcurrentTransforms, BatchStrategy and MaxPayloadInMB: SAGEMAKER_* values when set,
    else one request per CPU per model server, capped so that concurrency x payload <= 100 MB."""
    payload = settings.max_payload_in_mb
    if payload is None:
        payload = DEFAULT_MAX_PAYLOAD_IN_MB
    concurrency = settings.max_concurrent_transforms
    if concurrency is None:
        concurrency = max(1, settings.cpu_count * settings.instance_count)
        if payload > 0:
            concurrency = min(concurrency, MAX_TOTAL_PAYLOAD_IN_MB // payload)
    return {
        "MaxConcurrentTransforms": concurrency,
        "BatchStrategy": settings.batch_strategy or CONTAINER_SPELLING[DEFAULT_BATCH_STRATEGY],
        "MaxPayloadInMB": payload,
    }
