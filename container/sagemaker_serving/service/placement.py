"""Where a request's Python work runs: on the worker's event loop, or on its threads.

On the event loop a call costs nothing extra, but while it runs no other request of the worker
moves; a thread lets other requests go on, for a hand-off of about 0.1 ms per call. So:

- A user handler starts on the threads. After INLINE_AFTER calls in a row that each used under
  QUICK_CPU_SECONDS of CPU and waited (on a socket, a file, a lock: time off the CPU) under
  QUICK_WAIT_SECONDS, it runs on the event loop: a handler that waits would hold up every
  request of the worker there, but not on a thread. LOOP_STRIKES calls within LOOP_WINDOW
  that hold the loop longer than LOOP_HOLD_SECONDS by themselves (using the CPU or waiting:
  not when the OS only ran another process), or one that holds it longer than
  LOOP_STALL_SECONDS, send it back to the threads for good.
  `handler(data, context)` calls the model server itself: always threads.
- Our own conversions run on the loop, or on a thread when the payload is large or they may
  wait on the model server (built-in formats).

`SAGEMAKER_GUNICORN_WORKER_CLASS` chooses: `uvicorn` (and `gevent`) as above; `gthread` every
user handler on SAGEMAKER_GUNICORN_THREADS threads; `sync` one handler at a time per worker.

A call on the threads is never interrupted. When every thread holds a call that has run past
`overdue_after` seconds (its request was answered 504 long ago), the worker can answer no
handler call again: `threads_all_overdue` says so, and the worker ends for gunicorn to start
another (event_loop_worker.py), as gunicorn's timeout ends a stuck sync worker; so does a
call on the event loop past it (`loop_call_overdue`): the worker stops telling gunicorn it is
alive.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import resource
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sagemaker_serving.user_code import fork_guard

log = logging.getLogger(__name__)

INLINE_AFTER = 16
QUICK_CPU_SECONDS = 0.001
QUICK_WAIT_SECONDS = 0.00025
LOOP_HOLD_SECONDS = 0.002
# a call on the loop that held it longer counts against the handler when it used the CPU that
# long or waited (a socket, a file, a lock, a sleep: a voluntary context switch), not when the
# OS only gave the CPU to another process meanwhile (on a busy machine that happens to quick
# handlers too); a handler goes back to the threads after this many such calls within a window
# of calls, or after one call that stalls the loop, whatever held it
LOOP_STRIKES, LOOP_WINDOW = 3, 32
LOOP_STALL_SECONDS = 0.1

_loop_call_started: float | None = None  # time.perf_counter() when the running one began
# the calls on this worker's threads: id -> time.monotonic() when each began; the threads
_thread_calls: dict[int, float] = {}
_call_ids = itertools.count()
_threads = 0
_overdue_after: float | None = None


def loop_call_overdue() -> bool:
    """Whether the user handler running on the event loop has held it past overdue_after."""
    started = _loop_call_started
    return (
        started is not None
        and _overdue_after is not None
        and time.perf_counter() - started > _overdue_after
    )


def threads_all_overdue() -> bool:
    """Whether every handler thread of this worker holds a call running past overdue_after."""
    if not _threads or _overdue_after is None:
        return False
    since = time.monotonic() - _overdue_after
    return sum(began < since for began in list(_thread_calls.values())) >= _threads


def _tracked(fn: Callable, *args: Any) -> Any:
    key = next(_call_ids)
    _thread_calls[key] = time.monotonic()
    try:
        return fn(*args)
    finally:
        del _thread_calls[key]


def handler_holds_loop() -> bool:
    """Whether a user handler is running on this process's event loop right now (the worker
    keeps gunicorn's heartbeat going meanwhile: a slow handler is not a stuck worker)."""
    return _loop_call_started is not None


ADAPTIVE_MODES = ("uvicorn", "gevent")


class _Record:
    """What the calls of one handler so far say about where it runs."""

    __slots__ = ("calls", "on_loop", "on_threads", "quick", "strikes")

    def __init__(self) -> None:
        self.on_loop = False
        self.on_threads = False  # for good
        self.quick = 0  # quick calls in a row, on the threads
        self.calls = self.strikes = 0  # on the loop, in the current window


class Placement:
    """Runs calls on the event loop or on this worker's threads (module docstring)."""

    def __init__(self, mode: str, threads: int, overdue_after: float | None = None) -> None:
        global _threads, _overdue_after
        self.adaptive = mode in ADAPTIVE_MODES
        threads = 1 if mode == "sync" else threads
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="handler")
        if overdue_after is not None:  # the worker's one Placement (python_service)
            _threads, _overdue_after = threads, overdue_after
        # weak: a multi-model endpoint's handlers go when their model is unloaded
        self._records: weakref.WeakKeyDictionary[Callable, _Record] = weakref.WeakKeyDictionary()

    def runs_on_loop(self, fn: Callable) -> bool:
        try:
            record = self._records.get(fn)
        except TypeError:
            return False
        return record is not None and record.on_loop

    async def handler(self, fn: Callable, *args: Any) -> Any:
        """A user handler, where its calls so far put it (a child it forks never returns
        here: fork_guard)."""
        record = self._record(fn) if self.adaptive else None
        if record is None or record.on_threads:
            return await self.thread(fork_guard.call, fn, *args, user=True)
        if record.on_loop:
            return self._on_loop_call(fn, record, args)
        result, error, cpu, wall = await self.thread(_timed, fn, args, user=True)
        if not (record.on_loop or record.on_threads):  # another call may have moved it
            self._count(fn, record, cpu < QUICK_CPU_SECONDS and wall - cpu < QUICK_WAIT_SECONDS)
        if error is not None:
            raise error
        return result

    async def thread(self, fn: Callable, *args: Any, user: bool = False) -> Any:
        """fn(*args) on a thread (with this task's context variables); a `user` code call is
        watched for running long past its deadline (threads_all_overdue), ours are not (a
        multi-model revival may take the load's time)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        if user:
            return await loop.run_in_executor(self.pool, context.run, _tracked, fn, *args)
        return await loop.run_in_executor(self.pool, context.run, fn, *args)

    async def ours(self, wait: bool, fn: Callable, *args: Any) -> Any:
        """One of our conversions: on a thread when it may `wait` (or is large), else here."""
        if wait:
            return await self.thread(fn, *args)
        return fn(*args)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _record(self, fn: Callable) -> _Record | None:
        """fn's record (made on first use); None for a callable that cannot be a weak key."""
        try:
            record = self._records.get(fn)
            if record is None:
                record = self._records[fn] = _Record()
        except TypeError:
            return None
        return record

    def _on_loop_call(self, fn: Callable, record: _Record, args: tuple) -> Any:
        global _loop_call_started
        usage = thread_usage()
        started = _loop_call_started = time.perf_counter()
        try:
            return fork_guard.call(fn, *args)
        finally:
            _loop_call_started = None
            held = time.perf_counter() - started
            record.calls += 1
            stalled = held > LOOP_STALL_SECONDS
            if stalled or (held > LOOP_HOLD_SECONDS and _its_own(usage, thread_usage())):
                record.strikes += 1
                if record.strikes >= LOOP_STRIKES or held > LOOP_STALL_SECONDS:
                    record.on_loop, record.on_threads = False, True
                    log.info(
                        "%s runs on threads from now on: %d of %d calls held the event loop "
                        "over %g ms (the last %.1f ms)",
                        _name(fn),
                        record.strikes,
                        record.calls,
                        LOOP_HOLD_SECONDS * 1000,
                        held * 1000,
                    )
            if record.calls >= LOOP_WINDOW:
                record.calls = record.strikes = 0

    def _count(self, fn: Callable, record: _Record, quick: bool) -> None:
        record.quick = record.quick + 1 if quick else 0
        if record.quick >= INLINE_AFTER:
            record.on_loop = True
            log.info("%s runs on the event loop: %d quick calls in a row", _name(fn), record.quick)


def thread_usage() -> tuple[float, int]:
    """(CPU seconds, voluntary context switches) of this thread so far; (0, 0) where the
    system does not tell."""
    if _RUSAGE_THREAD is None:
        return 0.0, 0
    usage = resource.getrusage(_RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime, usage.ru_nvcsw


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _its_own(before: tuple[float, int], after: tuple[float, int]) -> bool:
    """Whether a call that held the loop over LOOP_HOLD_SECONDS did so itself: it used the CPU
    that long, or it waited; not only preempted. Without the thread's usage, every one counts."""
    if _RUSAGE_THREAD is None:
        return True
    return after[0] - before[0] > LOOP_HOLD_SECONDS or after[1] > before[1]


def _timed(fn: Callable, args: tuple) -> tuple[Any, BaseException | None, float, float]:
    """(result, error, CPU seconds, wall seconds) of fn(*args) on this thread."""
    cpu, wall = time.thread_time(), time.perf_counter()
    try:
        result, error = fork_guard.call(fn, *args), None
    except Exception as exc:
        result, error = None, exc
    return result, error, time.thread_time() - cpu, time.perf_counter() - wall


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
