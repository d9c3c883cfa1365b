"""Supervisor: restarts with backoff, gives up on a child that keeps dying, stops in order."""

from __future__ import annotations

import signal
import sys
import time

from sagemaker_serving.supervisor import Child, RestartPolicy, Supervisor, stop_all

FAST = RestartPolicy(max_restarts=2, window_seconds=60, backoff_initial=0.05, backoff_max=0.2)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_child_that_keeps_dying_is_reported():
    child = Child("crasher", python("raise SystemExit(3)"), policy=FAST)
    supervisor = Supervisor([child], poll_interval=0.02)
    child.start()
    started = time.monotonic()
    assert supervisor.run() is child
    assert child.starts == 3  # first start + max_restarts restarts, then it gives up
    assert len(child.deaths) == 3
    assert time.monotonic() - started < 10


def test_backoff_grows_between_restarts():
    policy = RestartPolicy(max_restarts=5, window_seconds=60, backoff_initial=0.5, backoff_max=1.5)
    child = Child("c", python("pass"), policy=policy)
    assert child.record_death(100.0) and child.restart_at == 100.5
    assert child.record_death(101.0) and child.restart_at == 102.0
    assert child.record_death(103.0) and child.restart_at == 104.5  # capped at backoff_max


def test_old_deaths_leave_the_window():
    child = Child("c", python("pass"), policy=FAST)
    for t in (0.0, 1.0):
        assert child.record_death(t)
    assert child.record_death(100.0)  # the first two are outside the 60 s window
    assert len(child.deaths) == 1


def test_a_dead_child_is_restarted_and_a_stop_request_ends_the_run():
    child = Child("short", python("import time; time.sleep(0.2)"), policy=FAST)
    supervisor = Supervisor([child], poll_interval=0.02)
    restarted: list[int] = []
    supervisor.on_restart = lambda c: restarted.append(c.pid)
    child.start()
    deadline = time.monotonic() + 10
    while not restarted and time.monotonic() < deadline:
        assert supervisor.check() is None
        time.sleep(0.02)
    assert restarted and child.starts == 2
    supervisor.request_stop()
    assert supervisor.run() is None
    stop_all([child], 5)
    assert not child.alive()


def test_stop_all_kills_a_child_that_ignores_its_signal():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    child = Child("stubborn", python(code))
    child.start()
    time.sleep(0.5)  # let it install the handler
    started = time.monotonic()
    stop_all([child], 1.0)
    assert not child.alive()
    assert child.proc is not None and child.proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 8


def test_orphans_are_reaped_and_our_own_children_left_to_their_popen():
    import os
    import subprocess
    import time

    from sagemaker_serving.supervisor import reap_orphans

    ours = subprocess.Popen(["true"])
    stranger = subprocess.Popen(["true"])  # stands in for an orphan: not in `known`
    time.sleep(0.5)
    reaped = reap_orphans({ours.pid})
    # the scan stops at a dead child of ours; once it is polled, the stranger goes
    assert ours.poll() == 0
    reaped += reap_orphans({ours.pid})
    assert stranger.pid in reaped
    assert not os.path.exists(f"/proc/{stranger.pid}")
    stranger.returncode = 0  # reaped behind its Popen's back, as an orphan would be
