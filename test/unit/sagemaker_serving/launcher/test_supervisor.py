"""Supervisor: restarts with backoff, gives up on a child that keeps dying, stops in order,
and takes every child's process group with it (with the watchdog: nothing outlives serve)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sagemaker_serving.launcher.supervisor import (
    Child,
    RestartPolicy,
    Supervisor,
    reap_orphans,
    stop_all,
)
from sagemaker_serving.launcher.watchdog import Watchdog

FAST = RestartPolicy(max_restarts=2, window_seconds=60, backoff_initial=0.05, backoff_max=0.2)

# prints "ready" once SIGTERM is ignored (its own and, with argv[1] == "group", a grandchild's)
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "if sys.argv[1:] == ['group']:\n"
    "    code = ('import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '\n"
    "            'print(\"ready\", flush=True); time.sleep(60)')\n"
    "    g = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE)\n"
    "    g.stdout.readline()\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def started_stubborn(*args: str) -> Child:
    """A Child that ignores SIGTERM, started and past its 'ready' line."""
    child = Child("stubborn", python(STUBBORN, *args))
    child.relay = lambda _name, _stream: None  # stdout piped: read here
    child.start()
    assert child.proc is not None and child.proc.stdout is not None
    assert child.proc.stdout.readline().strip() == b"ready"
    return child


def test_a_child_that_keeps_dying_is_reported():
    child = Child("crasher", python("raise SystemExit(3)"), policy=FAST)
    supervisor = Supervisor([child], poll_interval=0.02)
    child.start()
    started = time.monotonic()
    assert supervisor.run() is child
    assert child.starts == 3  # first start + max_restarts restarts, then it gives up
    assert len(child.deaths) == 3
    # both restarts waited for their backoff: 0.05 s, then 0.1 s
    assert time.monotonic() - started >= 0.15


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
    child = Child("short", python("import time; time.sleep(0.3)"), policy=FAST)
    supervisor = Supervisor([child], poll_interval=0.02)
    child.start()
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    deadline = time.monotonic() + 10
    while child.starts < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    supervisor.request_stop()
    runner.join(10)
    assert not runner.is_alive() and child.starts == 2
    stop_all([child], 5)
    assert not child.alive()


def test_a_death_is_reported_before_its_restart():
    child = Child("short", python("pass"), policy=FAST)
    supervisor = Supervisor([child], poll_interval=0.02)
    reported_at_start: list[int] = []  # the start count when each death was reported
    supervisor.on_death = lambda dead: reported_at_start.append(dead.starts)
    child.start()
    deadline = time.monotonic() + 10
    while child.starts < 2 and time.monotonic() < deadline:
        assert supervisor.check() is None
        time.sleep(0.01)
    assert reported_at_start == [1]  # reported, then restarted
    stop_all([child], 5)


def test_stop_all_kills_a_child_that_ignores_its_signal(caplog):
    child = started_stubborn()
    started = time.monotonic()
    stop_all([child], 1.0)
    assert not child.alive()
    assert child.proc is not None and child.proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started >= 1.0  # it had its time first
    assert "stubborn did not stop within 1s: killing it" in caplog.text


def test_stop_kills_the_whole_group_of_a_child_that_ignores_sigterm(tree):
    child = started_stubborn("group")
    assert child.pid is not None
    (grandchild,) = tree.descendants(child.pid)
    child.stop(0.5)
    assert child.proc is not None and child.proc.returncode == -signal.SIGKILL
    assert tree.wait_gone([grandchild.pid], 2) == []


def test_orphans_are_reaped_and_our_own_children_left_to_their_popen():
    ours = subprocess.Popen(["true"])
    stranger = subprocess.Popen(["true"])  # stands in for an orphan: not in `known`
    for proc in (ours, stranger):  # both exited, neither reaped
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    reaped = reap_orphans({ours.pid})
    # the scan stops at a dead child of ours; once it is polled, the stranger goes
    assert ours.poll() == 0
    reaped += reap_orphans({ours.pid})
    assert stranger.pid in reaped
    assert not os.path.exists(f"/proc/{stranger.pid}")
    stranger.returncode = 0  # reaped behind its Popen's back, as an orphan would be


def test_an_exited_child_takes_its_group_with_it(tree):
    # nginx's or gunicorn's master gone, its workers must not linger (and hold the port)
    child, grandchild = tree.spawner(0.5)
    assert child.wait(10)
    assert child.proc is not None and child.proc.returncode == 0
    assert tree.wait_gone([grandchild], 0.5) == []


def test_a_child_started_from_a_thread_outlives_the_thread(tmp_path: Path):
    # PR_SET_PDEATHSIG fired when the *thread* that forked the child exited
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "while not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"
        "print('alive', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = Child("sleeper", python(code, str(go)))
    child.relay = lambda _name, _stream: None
    thread = threading.Thread(target=child.start)
    thread.start()
    thread.join()
    go.touch()  # only now may it answer: after its thread is gone
    try:
        assert child.proc is not None and child.proc.stdout is not None
        assert child.proc.stdout.readline().strip() == b"alive"
        assert child.alive()
    finally:
        child.stop(2)


def test_a_dead_watchdog_is_replaced_and_knows_every_group(tree):
    watchdog = Watchdog()
    watchdog.start()
    child, grandchild = tree.spawner(60, watchdog=watchdog)
    supervisor = Supervisor([child], watchdog=watchdog)
    assert watchdog.proc is not None
    first = watchdog.proc
    first.kill()
    first.wait(5)
    assert tree.wait_gone([grandchild], 0) == [grandchild]  # a killed watchdog kills nothing
    assert supervisor.check() is None
    assert watchdog.alive() and watchdog.proc is not first
    watchdog.stop()  # the new one kills the group it was told about at its start
    assert tree.wait_gone([grandchild], 5) == []
    assert child.wait(5)


SERVE_STAND_IN = """
import sys, time
from sagemaker_serving.launcher.supervisor import Child
from sagemaker_serving.launcher.watchdog import Watchdog

watchdog = Watchdog()
watchdog.start()
for i in range(2):
    Child(f"c{i}", [sys.executable, "-c", sys.argv[1], "60"], watchdog=watchdog).start()
print("started", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_nothing_outlives_a_dead_serve(tree, signum):
    serve = subprocess.Popen(
        [*python(SERVE_STAND_IN), tree.SPAWNER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert serve.stdout is not None and serve.stdout.readline().strip() == "started"
        # the watchdog, 2 children and their 2 children
        descendants = tree.descendants(serve.pid, 5)
        serve.send_signal(signum)
        serve.wait(10)
        assert tree.wait_gone([p.pid for p in descendants], 5) == []
    finally:
        serve.kill()
        serve.wait(10)


def test_process_groups_are_their_own(tree):
    child, grandchild = tree.spawner(60)
    assert child.pid is not None
    assert os.getpgid(child.pid) == child.pid == os.getpgid(grandchild)
    assert os.getpgid(child.pid) != os.getpgrp()
    child.stop(5)
    assert tree.wait_gone([grandchild], 5) == []
