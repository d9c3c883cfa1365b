"""Process trees for the launcher's tests: children that start grandchildren, and waits (with a
deadline) for processes to be gone. Whatever a test leaves running is killed afterwards."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from sagemaker_serving.launcher.supervisor import Child

# a child that starts a grandchild (in its process group), says both pids, lives argv[1] s
SPAWNER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def gone(pid: int) -> bool:
    """Exited (a zombie counts: it runs nothing and holds no port)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class ProcessTree:
    """Helpers that start and watch processes; it kills what they started at the end."""

    SPAWNER = SPAWNER

    def __init__(self) -> None:
        self.started: list[psutil.Process] = []

    def wait_gone(self, pids: list[int], timeout: float = 5.0) -> list[int]:
        """The pids still running after `timeout` s (polled)."""
        deadline = time.monotonic() + timeout
        while (left := [pid for pid in pids if not gone(pid)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        return left

    def descendants(self, pid: int, count: int = 1) -> list[psutil.Process]:
        """Once `pid` has `count` descendants (within 10 s): all of them."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = psutil.Process(pid).children(recursive=True)
            if len(found) >= count:
                self.started += found
                return found
            time.sleep(0.02)
        raise AssertionError(f"pid {pid} did not start {count} processes")

    def spawner(self, seconds: float, **kwargs) -> tuple[Child, int]:
        """A started Child that starts a grandchild and lives `seconds`; (child, grandchild)."""
        child = Child("spawner", [*python(SPAWNER), str(seconds)], **kwargs)
        child.start()
        assert child.pid is not None
        self.started.append(psutil.Process(child.pid))
        return child, self.descendants(child.pid)[0].pid

    def kill_all(self) -> None:
        for process in self.started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


@pytest.fixture
def tree() -> Iterator[ProcessTree]:
    processes = ProcessTree()
    try:
        yield processes
    finally:
        processes.kill_all()
