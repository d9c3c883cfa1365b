"""A process and everything it started, found through /proc, whatever they did to leave its
process group (a session of their own, a double fork): for stopping them all.

A process is named by its pid and its start time (`Proc`), so a pid used again by an unrelated
process is never signalled. `become_subreaper()` makes orphans of the caller's descendants its
own children (not init's), so they stay under it, in reach. Standard library only (the handler
processes and serve's watchdog import it too).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from typing import NamedTuple

_PR_SET_CHILD_SUBREAPER = 36
SETTLE_SECONDS = 0.02  # between rounds of SIGKILL while processes still fork


class Proc(NamedTuple):
    pid: int
    start: int  # clock ticks after boot (/proc/PID/stat, field 22)


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it; False where the kernel
    (or the C library) cannot."""
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return False


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of `pid`, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), fields[0].decode()


def proc(pid: int) -> Proc | None:
    found = _stat(pid)
    return None if found is None else Proc(pid, found[1])


def alive(p: Proc) -> bool:
    """Whether `p` still runs (the same process: same start time; a zombie is not running)."""
    found = _stat(p.pid)
    return found is not None and found[1] == p.start and found[2] != "Z"


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(child) for child in f.read().split()]
        except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: ask every process
            return [other for other in _all_pids() if (_stat(other) or (0,))[0] == pid]
        except OSError:
            continue
    return found


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(pid: int) -> list[Proc]:
    """Every process under `pid` (children first, then theirs)."""
    found: list[Proc] = []
    seen = {pid}
    pending = [pid]
    while pending:
        for child in _children(pending.pop()):
            if child not in seen and (p := proc(child)) is not None:
                seen.add(child)
                found.append(p)
                pending.append(child)
    return found


def kill_all(procs: list[Proc], deadline: float) -> int:
    """SIGKILL `procs` (those still running) and everything under them, again while any of
    them forked meanwhile, until none is left or `deadline` (time.monotonic()). How many were
    killed."""
    targets = {p for p in procs if alive(p)}
    killed: set[Proc] = set()
    while targets:
        for target in list(targets):
            targets |= {d for d in descendants(target.pid) if d not in killed}
        for target in targets:
            if alive(target):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target.pid, signal.SIGKILL)
        killed |= targets
        if time.monotonic() >= deadline:
            break
        time.sleep(SETTLE_SECONDS)
        targets = {d for t in killed for d in descendants(t.pid) if d not in killed}
    return len(killed)
