"""Large x-npy request bodies (an asynchronous endpoint's, up to 1 GiB), written to disk a block
at a time, for the variable_length model (x [None, None] -> row sums: a small answer)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import requests

COLUMNS = 4096  # float32 row: 16 KiB
HEADER = 128  # a 2-D float32 array's .npy header


def shape_of(total: int) -> tuple[int, int]:
    """(rows, columns) of a float32 .npy file of exactly `total` bytes (its header is 128)."""
    values = (total - HEADER) // 4
    for columns in range(1024, 8192):
        if values % columns == 0 and (total - HEADER) % 4 == 0:
            return values // columns, columns
    return values // COLUMNS, COLUMNS  # near `total`


def npy_file(path: Path, mib: int) -> tuple[int, float]:
    """A .npy file of float32 rows, `mib` MiB in all where a shape allows (1024: 178481 x 1504
    floats and the header, exactly 1 GiB); (rows, the sum of all)."""
    rows, columns = shape_of(mib * 1024 * 1024)
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, columns))
    for start in range(0, rows, 4096):
        block = array[start : start + 4096]
        block[...] = np.arange(start, start + len(block), dtype=np.float32)[:, None] / 1000.0
    array.flush()
    return rows, float(columns * np.sum(np.arange(rows, dtype=np.float64) / 1000.0))


class PeakSampler(threading.Thread):
    """Samples `read()` (memory in bytes by part) every `interval` s until `stop()`: the peak of
    the sum, the parts at that peak, and each part's own peak."""

    def __init__(self, read: Callable[[], dict[str, int]], interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.read, self.interval, self.done = read, interval, threading.Event()
        self.peak = 0
        self.at_peak: dict[str, int] = {}
        self.part_peaks: dict[str, int] = {}

    def run(self) -> None:
        while not self.done.wait(self.interval):
            parts = self.read()
            if sum(parts.values()) > self.peak:
                self.peak, self.at_peak = sum(parts.values()), parts
            for name, used in parts.items():
                self.part_peaks[name] = max(self.part_peaks.get(name, 0), used)

    def stop(self) -> None:
        self.done.set()
        self.join()


def post_npy(url: str, path: Path) -> requests.Response:
    """POST /invocations of the .npy file at `path`, read from disk as it is sent."""
    with path.open("rb") as stream:
        return requests.post(
            f"{url}/invocations",
            data=stream,
            headers={
                "Content-Type": "application/x-npy",
                "Content-Length": str(path.stat().st_size),
            },
            timeout=900,
        )
