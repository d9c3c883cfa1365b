"""SageMaker Batch Transform's parameters as a job and the container name them: BatchStrategy
and MaxPayloadInMB (MaxConcurrentTransforms has no rule of its own beyond the total below).

The one home of these rules for the container (settings.py) and the
local Batch Transform runner (tfs_batch_transform, which imports this leaf; it imports nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# BatchStrategy as the CreateTransformJob API spells it.
SINGLE_RECORD = "SingleRecord"
MULTI_RECORD = "MultiRecord"
BATCH_STRATEGIES = (SINGLE_RECORD, MULTI_RECORD)
# ... and as the container does (SAGEMAKER_BATCH_STRATEGY, GET /execution-parameters).
CONTAINER_SPELLING: Mapping[str, str] = MappingProxyType(
    {MULTI_RECORD: "MULTI_RECORD", SINGLE_RECORD: "SINGLE_RECORD"}
)
# SageMaker's API reference gives BatchStrategy no default: this container's choice.
DEFAULT_BATCH_STRATEGY = MULTI_RECORD

MIB = 1024 * 1024  # MaxPayloadInMB counts MiB, as the container's body limit and botocore do
MAX_PAYLOAD_IN_MB = 100  # MaxPayloadInMB is 0 (no limit: bodies sent chunked) to this
DEFAULT_MAX_PAYLOAD_IN_MB = 6  # the API reference's default
MAX_TOTAL_PAYLOAD_IN_MB = 100  # MaxConcurrentTransforms x MaxPayloadInMB must not exceed this


def strategy_name(value: str) -> str:
    """The API's name of a BatchStrategy given in either spelling (`SingleRecord`, or
    `SINGLE_RECORD` in any case); ValueError for anything else."""
    if value in BATCH_STRATEGIES:
        return value
    for name, spelling in CONTAINER_SPELLING.items():
        if value.upper() == spelling:
            return name
    raise ValueError(f"batch strategy must be {' or '.join(BATCH_STRATEGIES)}, got {value!r}")
