"""Mini-batches: which records go into each request. BatchStrategy SingleRecord sends one
record per request, MultiRecord as many whole records as fit in MaxPayloadInMB."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sagemaker_serving.config.batch_parameters import (
    BATCH_STRATEGIES,
    MAX_PAYLOAD_IN_MB,
    MIB,
    SINGLE_RECORD,
)


class PayloadTooLarge(ValueError):
    """A record (or a whole object with SplitType None) is larger than MaxPayloadInMB."""


@dataclass(frozen=True)
class Batch:
    """Records `start` (inclusive) to `stop` (exclusive) of one object, sent in one request."""

    start: int
    stop: int

    @property
    def count(self) -> int:
        return self.stop - self.start


def payload_limit_bytes(max_payload_in_mb: int) -> int | None:
    """The byte limit for MaxPayloadInMB; None for 0 (no limit: bodies are sent chunked)."""
    if not 0 <= max_payload_in_mb <= MAX_PAYLOAD_IN_MB:
        raise ValueError(f"MaxPayloadInMB must be 0..{MAX_PAYLOAD_IN_MB}, got {max_payload_in_mb}")
    return max_payload_in_mb * MIB if max_payload_in_mb else None


def pack(sizes: Sequence[int], strategy: str, limit: int | None) -> list[Batch]:
    """Batches for records of the given body sizes, in order.

    SingleRecord: one record each. MultiRecord: as many whole records as fit in `limit` bytes
    (no limit: all of them). A record larger than `limit` raises PayloadTooLarge.
    """
    if strategy not in BATCH_STRATEGIES:
        raise ValueError(f"unknown batch strategy {strategy!r}; expected one of {BATCH_STRATEGIES}")
    if limit is not None:
        for index, size in enumerate(sizes):
            if size > limit:
                raise PayloadTooLarge(
                    f"record {index} is {size} bytes, over MaxPayloadInMB ({limit} bytes)"
                )
    if strategy == SINGLE_RECORD:
        return [Batch(i, i + 1) for i in range(len(sizes))]
    batches = []
    start, total = 0, 0
    for index, size in enumerate(sizes):
        if limit is not None and index > start and total + size > limit:
            batches.append(Batch(start, index))
            start, total = index, 0
        total += size
    if start < len(sizes):
        batches.append(Batch(start, len(sizes)))
    return batches
