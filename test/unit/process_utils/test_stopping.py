"""process_utils.stopping: a graceful signal to each process at once, one deadline, SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from process_utils import PopenProcess, stop_all, terminate

# SIGINT's default action is set too: a child of a shell's background job starts with SIGINT
# ignored (and Python then installs no KeyboardInterrupt handler).
IGNORES_SIGTERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
SLEEPS = "import time; print('ready', flush=True); time.sleep(60)"


def started(code: str) -> subprocess.Popen:
    """A Python child that has run up to its 'ready' line (its signal handlers installed)."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


class Recorded(PopenProcess):
    """A PopenProcess that notes what is done to it, in order, in a shared list."""

    def __init__(self, name: str, proc: subprocess.Popen, events: list[str]) -> None:
        super().__init__(proc)
        self.name = name
        self.events = events

    def signal(self, signum: int) -> None:
        self.events.append(f"signal {self.name}")
        super().signal(signum)

    def wait(self, timeout: float) -> bool:
        self.events.append(f"wait {self.name}")
        return super().wait(timeout)

    def kill(self) -> None:
        self.events.append(f"kill {self.name}")
        super().kill()


def test_terminate_stops_a_process_with_sigterm():
    proc = started(SLEEPS)
    assert terminate(proc, 10) == -signal.SIGTERM


def test_terminate_kills_a_process_that_ignores_sigterm_after_the_timeout():
    proc = started(IGNORES_SIGTERM)
    began = time.monotonic()
    assert terminate(proc, 0.5) == -signal.SIGKILL
    assert time.monotonic() - began >= 0.5


def test_terminate_sends_nothing_to_a_process_that_has_exited():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(30)
    assert terminate(proc, 10) == 3


def test_terminate_with_another_graceful_signal():
    proc = started(IGNORES_SIGTERM)
    assert terminate(proc, 10, graceful_signal=signal.SIGINT) == -signal.SIGINT


def test_stop_all_signals_every_process_before_it_waits_for_any():
    events: list[str] = []
    processes = [Recorded(name, started(SLEEPS), events) for name in ("a", "b")]
    stop_all(processes, 10)
    assert events == ["signal a", "signal b", "wait a", "wait b"]
    assert [p.proc.returncode for p in processes] == [-signal.SIGTERM, -signal.SIGTERM]


def test_stop_all_kills_only_what_overruns_and_says_so_first():
    events: list[str] = []
    polite = Recorded("polite", started(SLEEPS), events)
    stubborn = Recorded("stubborn", started(IGNORES_SIGTERM), events)
    stop_all([stubborn, polite], 0.5, on_kill=lambda p: events.append(f"overran {p.name}"))
    assert events == [
        "signal stubborn",
        "signal polite",
        "wait stubborn",
        "overran stubborn",
        "kill stubborn",
        "wait stubborn",
        "wait polite",
    ]
    assert stubborn.proc.returncode == -signal.SIGKILL
    assert polite.proc.returncode == -signal.SIGTERM
