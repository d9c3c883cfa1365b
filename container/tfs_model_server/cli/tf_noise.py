"""TensorFlow's native start-up lines that say nothing on a host without a GPU (no CUDA
driver found, cuInit failed, oneDNN is on, the CPU has more instructions than the build uses,
absl's note that it logs to stderr before its initialisation): kept from the output there.

They are written by C++ straight to file descriptor 2 while the runtime loads, so that is
caught in a temporary file for the time of the load and written out again without them (all
else in order). On a host with a GPU, and when TF_CPP_MIN_LOG_LEVEL=0 asks for everything,
nothing is held back. TensorFlow's devices on a host without a GPU are the CPU's
(TF_ENABLED_DEVICE_TYPES, unless set), so no session tries CUDA later either.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

CPU_DEVICE_TYPES = "CPU,XLA_CPU"
NOISE = (
    "All log messages before absl::InitializeLog() is called are written to STDERR",
    "Could not find cuda drivers on your machine",
    "failed call to cuInit",
    "oneDNN custom operations are on",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "rebuild TensorFlow with the appropriate compiler flags",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "computation placer already registered",
    "TF-TRT Warning: Could not find TensorRT",
)


def has_gpu(dev: Path = Path("/dev")) -> bool:
    """An NVIDIA GPU device node is present (as in a GPU container or host)."""
    return any(dev.glob("nvidia[0-9]*"))


def is_noise(line: str) -> bool:
    return any(marker in line for marker in NOISE)


@contextlib.contextmanager
def quiet_cpu_start(gpu: bool | None = None) -> Iterator[None]:
    """Around the runtime's load: on a host without a GPU, its NOISE lines are dropped."""
    gpu = has_gpu() if gpu is None else gpu
    if gpu or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        yield
        return
    os.environ.setdefault("TF_ENABLED_DEVICE_TYPES", CPU_DEVICE_TYPES)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if not is_noise(line)]
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
