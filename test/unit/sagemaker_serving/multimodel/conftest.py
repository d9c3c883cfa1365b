"""Another process holding the multi-model registry's lock."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HOLD_LOCK = """
import sys, time
from pathlib import Path
from sagemaker_serving.multimodel.registry import Registry
with Registry(Path(sys.argv[1])).locked():
    print("locked", flush=True)
    time.sleep(60)
"""


@contextlib.contextmanager
def lock_held_elsewhere(state_dir: Path) -> Iterator[subprocess.Popen]:
    """Another process holding the registry's lock (it says so once it has it), killed after."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(state_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        holder.kill()
        holder.wait(10)


@pytest.fixture
def hold_lock() -> Callable[[Path], contextlib.AbstractContextManager[subprocess.Popen]]:
    """`with hold_lock(state_dir) as holder:` the lock is another process's in the block."""
    return lock_held_elsewhere
