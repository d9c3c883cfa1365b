"""Stop processes: a graceful signal to each at once, one deadline for all, then SIGKILL."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

KILL_WAIT_SECONDS = 5.0  # after SIGKILL, the time a process gets to be reaped


class Stoppable(Protocol):
    """A process that can be stopped: a subprocess.Popen (PopenProcess) or serve's Child."""

    @property
    def graceful_signal(self) -> int: ...

    def signal(self, signum: int) -> None:
        """Send `signum` unless the process has exited."""

    def wait(self, timeout: float) -> bool:
        """True once the process has exited (within `timeout` seconds)."""

    def kill(self) -> None:
        """SIGKILL it (and whatever it started, where that is known)."""


P = TypeVar("P", bound=Stoppable)


def stop_all(
    processes: Sequence[P],
    timeout: float,
    kill_wait: float = KILL_WAIT_SECONDS,
    on_kill: Callable[[P], None] | None = None,
) -> None:
    """Send every process its graceful signal at once, then wait for all; one still running
    `timeout` seconds later gets SIGKILL (after `on_kill`) and `kill_wait` seconds more."""
    deadline = time.monotonic() + timeout
    for process in processes:
        process.signal(process.graceful_signal)
    for process in processes:
        if not process.wait(max(0.0, deadline - time.monotonic())):
            if on_kill is not None:
                on_kill(process)
            process.kill()
            process.wait(kill_wait)


class PopenProcess:
    """A subprocess.Popen seen as Stoppable."""

    def __init__(self, proc: subprocess.Popen, graceful_signal: int = signal.SIGTERM) -> None:
        self.proc = proc
        self.graceful_signal = graceful_signal

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def wait(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


def terminate(
    proc: subprocess.Popen, timeout: float, graceful_signal: int = signal.SIGTERM
) -> int | None:
    """SIGTERM (or `graceful_signal`), then SIGKILL after `timeout` seconds; the exit code
    (None if even SIGKILL left it running for KILL_WAIT_SECONDS)."""
    if proc.poll() is None:
        stop_all([PopenProcess(proc, graceful_signal)], timeout)
    return proc.returncode
