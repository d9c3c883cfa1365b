"""process_utils.parent_death: a child started with die_with_parent ends with its parent."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

PARENT = """
import subprocess, sys, time
from process_utils import die_with_parent
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=%s
)
print(child.pid, flush=True)
time.sleep(60)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _parent_with_child(preexec: str) -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT % preexec], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_child_ends_when_its_parent_is_killed():
    parent, child = _parent_with_child("die_with_parent")
    parent.kill()
    parent.wait(10)
    assert _gone_within(child, 10)


def test_without_it_the_child_outlives_its_parent():
    parent, child = _parent_with_child("None")
    parent.kill()
    parent.wait(10)
    try:
        assert psutil.Process(child).status() != psutil.STATUS_ZOMBIE
    finally:
        process = psutil.Process(child)
        process.kill()
        process.wait(10)
