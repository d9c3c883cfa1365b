"""Where handlers run: on the worker's threads until they prove quick, then on the event loop,
and back to the threads for good when they hold the loop; per SAGEMAKER_GUNICORN_WORKER_CLASS."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from sagemaker_serving.service import placement as pl
from sagemaker_serving.service.placement import Placement

ANSWER = contextvars.ContextVar("answer", default="unset")


@pytest.fixture(autouse=True)
def roomy(monkeypatch):
    """Limits far from what a busy machine does to a quick call, and a shorter probation."""
    for name, value in {
        "INLINE_AFTER": 4,
        "QUICK_CPU_SECONDS": 0.05,
        "QUICK_WAIT_SECONDS": 0.03,
        "LOOP_HOLD_SECONDS": 0.1,
        "LOOP_STRIKES": 3,
        "LOOP_WINDOW": 8,
        "LOOP_STALL_SECONDS": 0.25,
    }.items():
        monkeypatch.setattr(pl, name, value)


class Handler:
    """A handler that records the thread of each call and sleeps `pause` seconds in it."""

    def __init__(self, pause: float = 0.0) -> None:
        self.pause = pause
        self.threads: list[int] = []
        self.running = self.most_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, data, context):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.threads.append(threading.get_ident())
        if self.pause:
            time.sleep(self.pause)
        with self.lock:
            self.running -= 1
        return data


def calls(placement: Placement, handler, count: int, at_once: int = 1) -> int:
    """`count` calls, `at_once` at a time; returns the event loop's thread id."""

    async def run() -> int:
        for _ in range(0, count, at_once):
            n = min(at_once, count - len(handler.threads))
            results = await asyncio.gather(
                *(placement.handler(handler, b"x", None) for _ in range(n))
            )
            assert results == [b"x"] * n
        return threading.get_ident()

    try:
        return asyncio.run(run())
    finally:
        placement.close()


def test_a_quick_handler_moves_to_the_loop_after_a_run_of_quick_calls():
    handler = Handler()
    loop_thread = calls(Placement("uvicorn", 4), handler, pl.INLINE_AFTER + 10)
    assert loop_thread not in handler.threads[: pl.INLINE_AFTER]
    assert handler.threads[pl.INLINE_AFTER :] == [loop_thread] * 10


def test_a_handler_that_waits_stays_on_the_threads():
    handler = Handler(pause=pl.QUICK_WAIT_SECONDS * 2)  # little CPU, but off it: a socket read
    loop_thread = calls(Placement("uvicorn", 4), handler, pl.INLINE_AFTER * 2, at_once=4)
    assert loop_thread not in handler.threads


def test_one_slow_call_breaks_the_run_of_quick_calls():
    handler = Handler()
    placement = Placement("uvicorn", 2)

    async def run() -> None:
        for i in range(pl.INLINE_AFTER * 2 - 2):
            handler.pause = pl.QUICK_WAIT_SECONDS * 2 if i == pl.INLINE_AFTER - 2 else 0.0
            await placement.handler(handler, b"x", None)

    asyncio.run(run())
    placement.close()
    assert not placement.runs_on_loop(handler)


def test_a_handler_that_starts_holding_the_loop_goes_back_to_the_threads_for_good():
    handler = Handler()
    placement = Placement("uvicorn", 2)
    hold = pl.LOOP_HOLD_SECONDS * 1.5

    async def run() -> list[bool]:
        where = []
        for _ in range(pl.INLINE_AFTER):
            await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        handler.pause = hold
        for _ in range(pl.LOOP_STRIKES - 1):  # a slow call or two: the CPU may have been taken
            await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        handler.pause = 0.0
        for _ in range(pl.INLINE_AFTER * 2):
            await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        return where

    assert asyncio.run(run()) == [True, True, False, False]
    placement.close()


def test_one_call_that_stalls_the_loop_sends_the_handler_back_at_once():
    seen: list[bool] = []

    def handler(data, context):
        seen.append(pl.handler_holds_loop())  # what the worker's heartbeat thread reads
        time.sleep(float(data))
        return data

    placement = Placement("uvicorn", 2)

    async def run() -> list[bool]:
        where = []
        for _ in range(pl.INLINE_AFTER + 1):
            await placement.handler(handler, 0.0, None)
        where.append(placement.runs_on_loop(handler))
        await placement.handler(handler, pl.LOOP_STALL_SECONDS * 1.2, None)
        where.append(placement.runs_on_loop(handler))
        return where

    assert asyncio.run(run()) == [True, False]
    placement.close()
    assert seen == [False] * pl.INLINE_AFTER + [True, True]
    assert not pl.handler_holds_loop()


def test_slow_calls_in_different_windows_do_not_add_up():
    handler = Handler()
    placement = Placement("uvicorn", 2)

    async def run() -> None:
        for _ in range(pl.INLINE_AFTER):
            await placement.handler(handler, b"x", None)
        for i in range(pl.LOOP_WINDOW * pl.LOOP_STRIKES):
            handler.pause = pl.LOOP_HOLD_SECONDS * 1.5 if i % pl.LOOP_WINDOW == 0 else 0.0
            await placement.handler(handler, b"x", None)

    asyncio.run(run())
    placement.close()
    assert placement.runs_on_loop(handler)


def test_gthread_keeps_every_handler_on_the_threads():
    handler = Handler(pause=pl.QUICK_WAIT_SECONDS / 3)  # quick enough for the loop under `uvicorn`
    loop_thread = calls(Placement("gthread", 4), handler, pl.INLINE_AFTER * 3, at_once=4)
    assert loop_thread not in handler.threads
    assert handler.most_at_once > 1


def test_sync_runs_one_handler_call_at_a_time():
    handler = Handler(pause=0.01)
    loop_thread = calls(Placement("sync", 8), handler, 12, at_once=4)
    assert loop_thread not in handler.threads
    assert handler.most_at_once == 1


def test_gevent_places_handlers_as_uvicorn_does():
    handler = Handler()
    loop_thread = calls(Placement("gevent", 4), handler, pl.INLINE_AFTER + 1)
    assert handler.threads[-1] == loop_thread


def test_handlers_on_threads_see_the_requests_context_variables_and_raise_its_errors():
    placement = Placement("gthread", 2)

    def read(data, context):
        if data == b"boom":
            raise ValueError("from the handler")
        return ANSWER.get()

    async def run() -> str:
        ANSWER.set("this request's")
        with pytest.raises(ValueError, match="from the handler"):
            await placement.handler(read, b"boom", None)
        return await placement.handler(read, b"x", None)

    assert asyncio.run(run()) == "this request's"
    placement.close()


def test_a_callable_that_cannot_be_a_weak_key_stays_on_the_threads():
    class Slotted:
        __slots__ = ("threads",)

        def __init__(self) -> None:
            self.threads: list[int] = []

        def __call__(self, data, context):
            self.threads.append(threading.get_ident())
            return data

    handler = Slotted()
    loop_thread = calls(Placement("uvicorn", 2), handler, pl.INLINE_AFTER + 4)
    assert loop_thread not in handler.threads


def test_our_conversions_run_on_a_thread_only_when_they_may_wait():
    placement = Placement("uvicorn", 2)

    async def run() -> tuple[int, int, int]:
        here = await placement.ours(False, threading.get_ident)
        there = await placement.ours(True, threading.get_ident)
        return threading.get_ident(), here, there

    loop_thread, here, there = asyncio.run(run())
    placement.close()
    assert here == loop_thread != there


def test_a_quick_handler_the_os_preempted_stays_on_the_loop(monkeypatch):
    """A call that held the loop only because the CPU went to another process (no CPU of its
    own, no wait: what the thread's usage says) is no strike; a stall still is."""
    monkeypatch.setattr(pl, "thread_usage", lambda: (0.0, 0))  # as if preempted throughout
    handler = Handler()
    placement = Placement("uvicorn", 2)

    async def run() -> list[bool]:
        where = []
        for _ in range(pl.INLINE_AFTER):
            await placement.handler(handler, b"x", None)
        handler.pause = pl.LOOP_HOLD_SECONDS * 1.5
        for _ in range(pl.LOOP_STRIKES * 2):
            await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        handler.pause = pl.LOOP_STALL_SECONDS * 1.2
        await placement.handler(handler, b"x", None)
        where.append(placement.runs_on_loop(handler))
        return where

    assert asyncio.run(run()) == [True, False]
    placement.close()


@pytest.mark.parametrize(("mode", "threads"), [("sync", 1), ("gthread", 2)])
def test_threads_all_held_past_the_deadline_are_reported(monkeypatch, mode, threads):
    # a sync worker whose one handler never returned answered 504 to every request after it,
    # for good, while /ping said 200 (event_loop_worker.py now ends such a worker)
    for name, value in {"_threads": 0, "_overdue_after": None, "_thread_calls": {}}.items():
        monkeypatch.setattr(pl, name, value)
    placement = Placement(mode, 2, overdue_after=2.0)  # sync: one thread whatever is asked
    release = threading.Event()

    async def until(condition, seconds: float = 20.0) -> None:
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def stuck_calls() -> None:
        calls = [placement.handler(lambda: release.wait(60)) for _ in range(threads)]
        tasks = [asyncio.ensure_future(call) for call in calls]
        await until(lambda: len(pl._thread_calls) == threads)
        began = min(pl._thread_calls.values())
        if time.monotonic() - began < 1.0:  # a loaded machine may take longer to look
            assert not pl.threads_all_overdue()  # running, not late yet
        await until(pl.threads_all_overdue)
        assert pl.threads_all_overdue() and time.monotonic() - began >= 2.0
        release.set()
        await asyncio.gather(*tasks)
        assert not pl.threads_all_overdue() and not pl._thread_calls

    try:
        asyncio.run(stuck_calls())
    finally:
        release.set()
        placement.close()


def test_only_user_code_calls_are_watched_for_running_past_their_deadline(monkeypatch):
    # a multi-model revival (ours, on a thread) may take the load's time: never "stuck"
    for name, value in {"_threads": 0, "_overdue_after": None, "_thread_calls": {}}.items():
        monkeypatch.setattr(pl, name, value)
    placement = Placement("uvicorn", 2, overdue_after=60.0)

    def watched() -> int:
        return len(pl._thread_calls)

    async def both() -> tuple[int, int]:
        return await placement.thread(watched), await placement.thread(watched, user=True)

    try:
        assert asyncio.run(both()) == (0, 1)
    finally:
        placement.close()
