"""Where a builder writes: `dest/<version>/`, published atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

PathLike = str | os.PathLike[str]


@contextmanager
def staged_version(dest: PathLike, version: int) -> Iterator[Path]:
    """Yield a fresh staging path; on success move it to `dest/<version>` (replacing it).

    The staging directory's name is not a number, so a server polling `dest` never
    loads a half-written version.
    """
    if int(version) < 0:
        raise ValueError(f"version must be a non-negative integer, got {version!r}")
    base = Path(dest)
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".staging-{version}-", dir=base))
    try:
        staged = scratch / "model"
        yield staged
        final = base / str(int(version))
        if final.exists():
            shutil.rmtree(final)
        os.replace(staged, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_version(dest: PathLike, version: int, write: Callable[[Path], None]) -> Path:
    """Write one SavedModel version with `write(path)`; return `dest` as a Path."""
    with staged_version(dest, version) as path:
        write(path)
    return Path(dest)
