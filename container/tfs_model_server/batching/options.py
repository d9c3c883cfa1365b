"""BatchingParameters as TF Serving reads them: its defaults and its checks, with TF's texts."""

from __future__ import annotations

import os
from dataclasses import dataclass

from tfs_model_server.errors import invalid_argument


def _default_threads() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class BatchingOptions:
    """BatchingParameters, with TF's defaults for a server run without a parameters file.

    `max_batch_size` is TF's `input_batch_size_limit`: the largest task accepted, and the
    largest batch unless `enable_large_batch_splitting`, when batches hold at most
    `max_execution_batch_size` rows (default: `max_batch_size`).
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = _default_threads()
    thread_pool_name: str = "model_server_batch_threads"
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_batch_sizes", tuple(self.allowed_batch_sizes))

    @property
    def execution_batch_size(self) -> int:
        """The most rows one batch may hold (GetQueueOptions / GetMaxExecutionBatchSize)."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size is not None:
            return self.max_execution_batch_size
        return self.max_batch_size

    @property
    def queue_capacity(self) -> int:
        """max_enqueued_batches as AddQueue applies it: 0 means 1 unless splitting."""
        if self.max_enqueued_batches == 0 and not self.enable_large_batch_splitting:
            return 1
        return self.max_enqueued_batches

    def validate(self) -> None:
        """Raise INVALID_ARGUMENT with TF's text for options TF Serving would reject."""
        if self.num_batch_threads < 1:
            raise invalid_argument(
                f"num_batch_threads must be positive; was {self.num_batch_threads}"
            )
        self._validate_allowed_batch_sizes()
        if self.max_batch_size <= 0:
            raise invalid_argument(
                f"input_batch_size_limit must be positive; was {self.max_batch_size}"
            )
        if self.batch_timeout_micros < 0:
            raise invalid_argument(
                f"batch_timeout_micros must be non-negative; was {self.batch_timeout_micros}"
            )
        if self.queue_capacity <= 0:
            raise invalid_argument(
                f"max_enqueued_batches must be positive; was {self.max_enqueued_batches}"
            )
        if self.enable_large_batch_splitting:
            self._validate_splitting()

    def _validate_allowed_batch_sizes(self) -> None:
        """WrapSessionForBatching checks only the last entry (the server's path never checks
        that the entries increase: the first one at least a batch's size pads it)."""
        sizes = self.allowed_batch_sizes
        if not sizes:
            return
        if sizes[-1] != self.max_batch_size:
            raise invalid_argument(
                "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                f"{sizes[-1]}; expected {self.max_batch_size}"
            )

    def _validate_splitting(self) -> None:
        execution = self.execution_batch_size
        if execution <= 0:
            raise invalid_argument(f"max_execution_batch_size must be positive; was {execution}")
        if self.max_batch_size < execution:
            # TF StrCat()s the three values onto the sentence without separators.
            raise invalid_argument(
                "When enable_large_batch_splitting is true, input_batch_size_limit must be "
                f"greater than or equal to max_execution_batch_size.1{self.max_batch_size}"
                f"{execution}"
            )
