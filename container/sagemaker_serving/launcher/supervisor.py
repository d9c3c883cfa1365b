"""Start, watch and stop child processes: restart with backoff, give up when one keeps dying."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, cast

import process_utils
from process_utils.exit_reason import MemoryCgroup, exit_reason
from sagemaker_serving.launcher.watchdog import Watchdog

log = logging.getLogger(__name__)

TAIL_BYTES = 4096  # of a child's output, kept for its last line
KILL_WAIT_SECONDS = 2.0  # after SIGKILL, the time a process gets to be reaped
_POLL_SECONDS = 0.02


def reap_orphans(known: set[int]) -> list[int]:
    """Collect exited processes that are not ours to poll: as PID 1 in a container, serve
    inherits every orphaned grandchild, and unreaped they stay zombies. A dead child of our
    own (in `known`) is left for its Popen; the scan stops there until that one is polled."""
    reaped: list[int] = []
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if info is None or info.si_pid in known:
            return reaped
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)
        reaped.append(info.si_pid)


class _Tail:
    """A child's output pipe for the relay, keeping the last TAIL_BYTES it read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.kept = b""

    def read1(self, size: int = -1) -> bytes:
        chunk = self.stream.read1(size)  # type: ignore[attr-defined]
        self.kept = (self.kept + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]  # at most twice copied
        return chunk


@dataclass(frozen=True)
class RestartPolicy:
    """Restart after backoff; more than max_restarts deaths within window_seconds is fatal."""

    max_restarts: int = 5
    window_seconds: float = 120.0
    backoff_initial: float = 0.5
    backoff_max: float = 10.0


class Child:
    """One supervised process: its command, how to stop it and its restart history.

    The child leads a process group of its own (its workers join it). When it exits, the group
    is swept with SIGKILL before the exit is reaped (the zombie leader keeps the group id from
    being reused), so no worker of a dead nginx or gunicorn master lingers; a `watchdog` (see
    watchdog.py) kills the group should serve itself die."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        policy: RestartPolicy | None = None,
        graceful_signal: int = signal.SIGTERM,
        relay: Callable[[str, IO[bytes]], None] | None = None,
        pass_fds: Sequence[int] = (),
        watchdog: Watchdog | None = None,
    ) -> None:
        """`relay`, when given, gets the child's stdout+stderr (one pipe, in a thread) instead
        of the terminal: serve writes every line of the stack itself (log_setup.relay)."""
        self.name = name
        self.relay = relay
        self.pass_fds = tuple(pass_fds)
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.policy = policy or RestartPolicy()
        self.graceful_signal = graceful_signal
        self.watchdog = watchdog
        self.proc: subprocess.Popen | None = None
        self.deaths: collections.deque[float] = collections.deque()
        self.restart_at: float | None = None
        self.starts = 0
        self.relays: list[threading.Thread] = []  # one per start, until its pipe closes
        self.tail: _Tail | None = None  # the last start's output, when relayed

    def start(self) -> None:
        log.info("starting %s: %s", self.name, " ".join(self.argv))
        piped = subprocess.PIPE if self.relay is not None else None
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=piped,
            stderr=subprocess.STDOUT if piped else None,
            # its own group (pgid == pid): terminal signals go to serve only, which stops us in
            # order, and the group can be killed whole
            start_new_session=True,
            pass_fds=self.pass_fds,
        )
        if self.watchdog is not None:
            self.watchdog.track(self.proc.pid)
        if self.relay is not None and self.proc.stdout is not None:
            self.tail = _Tail(self.proc.stdout)
            stream = cast(IO[bytes], self.tail)  # the relay reads it with read1 only
            thread = threading.Thread(target=self.relay, args=(self.name, stream), daemon=True)
            thread.start()
            self.relays = [t for t in self.relays if t.is_alive()] + [thread]
        self.starts += 1
        self.restart_at = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> int | None:
        """The exit code once the process has exited (its group swept and the exit reaped)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return None if proc is None else proc.returncode
        try:
            exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped behind the Popen's back: the group id may be reused
            return proc.wait()
        if exited is None:
            return None
        self.kill()  # the leader is a zombie: the group id is still ours
        code = proc.wait()
        if self.watchdog is not None:
            self.watchdog.forget(proc.pid)
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the process group (the leader and whatever it started), unless reaped
        (process_utils.Stoppable: a stop kills the whole group)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float) -> bool:
        """True once the process has exited (within timeout seconds)."""
        deadline = time.monotonic() + timeout
        while self.poll() is None and self.proc is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(_POLL_SECONDS, remaining))
        return True

    def last_line(self, timeout: float) -> str | None:
        """The last non-blank line the child wrote (its pipe relayed within `timeout` s), cut to
        300 characters; None when it wrote none or is not relayed."""
        self.drain(timeout)
        kept = self.tail.kept if self.tail is not None else b""
        lines = [line.strip() for line in kept.decode("utf-8", "replace").splitlines()]
        last = next((line for line in reversed(lines) if line), None)
        return last if last is None or len(last) <= 300 else last[:297] + "..."

    def drain(self, timeout: float) -> None:
        """Wait up to `timeout` s for what the child wrote to be relayed (its pipe closed)."""
        deadline = time.monotonic() + timeout
        for thread in self.relays:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop(self, timeout: float) -> None:
        """Graceful signal, then SIGKILL to the whole group after timeout."""
        stop_all([self], timeout)

    def record_death(self, now: float) -> bool:
        """Note an unexpected exit and schedule a restart; False if it dies too often."""
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > self.policy.window_seconds:
            self.deaths.popleft()
        if len(self.deaths) > self.policy.max_restarts:
            return False
        delay = min(
            self.policy.backoff_max, self.policy.backoff_initial * 2 ** (len(self.deaths) - 1)
        )
        self.restart_at = now + delay
        return True


class Supervisor:
    """Watches children until asked to stop or until one keeps dying."""

    def __init__(
        self,
        children: Sequence[Child],
        poll_interval: float = 0.2,
        watchdog: Watchdog | None = None,
        reap_orphans: bool = False,
    ) -> None:
        """`reap_orphans`: orphans become ours (serve is PID 1 or a subreaper): reap them."""
        self.children = list(children)
        self.poll_interval = poll_interval
        self.watchdog = watchdog
        self._stop = threading.Event()
        self.stop_requested_at: float | None = None  # time.monotonic() of the first request
        self.on_death: Callable[[Child], None] | None = None  # before its restart is due
        self.reap_orphans = reap_orphans
        self.memory = MemoryCgroup()  # names OOM kills in the death log

    def request_stop(self, *_: object) -> None:
        if self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.request_stop)

    def sleep(self, seconds: float) -> bool:
        """Sleep unless a stop is requested; True if one was."""
        return self._stop.wait(seconds)

    def check(self) -> Child | None:
        """Reap dead children and restart due ones; returns a child that died too often."""
        now = time.monotonic()
        for child in self.children:
            if child.proc is None:
                continue
            code = child.poll()
            if code is not None and child.restart_at is None:
                log.error(
                    "%s (pid %s) %s", child.name, child.proc.pid, exit_reason(code, self.memory)
                )
                if self.on_death is not None:
                    self.on_death(child)
                if not child.record_death(now):
                    return child
                log.info("restarting %s in %.1fs", child.name, (child.restart_at or now) - now)
            if child.restart_at is not None and now >= child.restart_at:
                child.start()
        if self.watchdog is not None and not self.watchdog.alive():
            log.error("the watchdog exited: starting another one")
            self.watchdog.start()
        if self.reap_orphans:
            known = {c.proc.pid for c in self.children if c.proc is not None}
            if self.watchdog is not None and self.watchdog.proc is not None:
                known.add(self.watchdog.proc.pid)
            reap_orphans(known)
        return None

    def run(self) -> Child | None:
        """Supervise until a stop request (None) or a child that keeps dying (that child)."""
        while not self._stop.is_set():
            failed = self.check()
            if failed is not None:
                return failed
            self._stop.wait(self.poll_interval)
        return None


def stop_all(children: Sequence[Child], timeout: float) -> None:
    """Send every child its graceful signal at once, then wait for all; a group still running
    after `timeout` seconds gets SIGKILL (reaped within KILL_WAIT_SECONDS more)."""

    def overran(child: Child) -> None:
        log.warning("%s did not stop within %.0fs: killing it", child.name, timeout)

    process_utils.stop_all(children, timeout, KILL_WAIT_SECONDS, on_kill=overran)
