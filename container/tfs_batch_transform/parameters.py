"""MaxConcurrentTransforms, BatchStrategy and MaxPayloadInMB: the job's value when given, else
the container's GET /execution-parameters answer, else SageMaker's defaults
(MaxConcurrentTransforms 1, MaxPayloadInMB 6)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_serving.config.batch_parameters import (
    DEFAULT_BATCH_STRATEGY,
    DEFAULT_MAX_PAYLOAD_IN_MB,
    MAX_PAYLOAD_IN_MB,
    strategy_name,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT_TRANSFORMS = 1  # the API reference's default


@dataclass(frozen=True)
class Parameters:
    max_concurrent_transforms: int
    batch_strategy: str
    max_payload_in_mb: int
    sources: Mapping[str, str]  # parameter -> "job" | "execution-parameters" | "default"


def _from_container(name: str, value: Any) -> Any:
    """A validated /execution-parameters value, or None (logged) when it is unusable."""
    try:
        if name == "BatchStrategy":
            return strategy_name(str(value))
        number = int(value)
        if isinstance(value, bool) or number != value:
            raise ValueError(value)
        if name == "MaxPayloadInMB" and not 0 <= number <= MAX_PAYLOAD_IN_MB:
            raise ValueError(value)
        if name == "MaxConcurrentTransforms" and number < 1:
            raise ValueError(value)
        return number
    except (TypeError, ValueError):
        log.warning("ignoring /execution-parameters %s=%r", name, value)
        return None


def resolve(
    max_concurrent_transforms: int | None,
    batch_strategy: str | None,
    max_payload_in_mb: int | None,
    execution_parameters: Mapping[str, Any],
) -> Parameters:
    """The job's values (None: not given) over the container's over the defaults."""
    given = {
        "MaxConcurrentTransforms": max_concurrent_transforms or None,  # 0: SageMaker decides
        "BatchStrategy": batch_strategy,
        "MaxPayloadInMB": max_payload_in_mb,
    }
    defaults = {
        "MaxConcurrentTransforms": DEFAULT_MAX_CONCURRENT_TRANSFORMS,
        "BatchStrategy": DEFAULT_BATCH_STRATEGY,
        "MaxPayloadInMB": DEFAULT_MAX_PAYLOAD_IN_MB,
    }
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, default in defaults.items():
        container = None
        if name in execution_parameters:
            container = _from_container(name, execution_parameters[name])
        if given[name] is not None:
            values[name], sources[name] = given[name], "job"
        elif container is not None:
            values[name], sources[name] = container, "execution-parameters"
        else:
            values[name], sources[name] = default, "default"
    return Parameters(
        values["MaxConcurrentTransforms"],
        strategy_name(values["BatchStrategy"]),
        values["MaxPayloadInMB"],
        sources,
    )
