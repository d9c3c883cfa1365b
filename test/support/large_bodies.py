"""Large x-npy request bodies (an asynchronous endpoint's, up to 1 GiB), written to disk a block
at a time, for the variable_length model (x [None, None] -> row sums: a small answer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
