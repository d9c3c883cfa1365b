"""Supervisor: restarts with backoff, gives up on a child that keeps dying, stops in order."""

from __future__ import annotations

import contextlib
import signal
import sys
import time

import psutil
import pytest

from sagemaker_serving.launcher.supervisor import Child, RestartPolicy, Supervisor, stop_all

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

    from sagemaker_serving.launcher.supervisor import reap_orphans

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


# ----- process groups and the watchdog: nothing outlives serve ---------------------------------

SPAWNER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if not _gone(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if not _gone(pid)]


def _grandchildren(pid: int, count: int = 1) -> list[psutil.Process]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = psutil.Process(pid).children(recursive=True)
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} did not start {count} processes")


def _spawner(seconds: float, **kwargs) -> tuple[Child, int]:
    """A child that starts a grandchild (in its process group) and lives `seconds`."""
    child = Child("spawner", [*python(SPAWNER), str(seconds)], **kwargs)
    child.start()
    assert child.pid is not None
    return child, _grandchildren(child.pid)[0].pid


def test_an_exited_child_takes_its_group_with_it():
    # nginx's or gunicorn's master gone, its workers must not linger (and hold the port)
    child, grandchild = _spawner(0.5)
    assert child.wait(10)
    assert child.proc is not None and child.proc.returncode == 0
    assert _wait_gone([grandchild], 0.5) == []


def test_stop_kills_the_whole_group_of_a_child_that_ignores_sigterm():
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    child = Child("stubborn", python(code))
    child.start()
    assert child.pid is not None
    (grandchild,) = _grandchildren(child.pid)
    time.sleep(0.3)  # let both install their handlers
    child.stop(0.5)
    assert child.proc is not None and child.proc.returncode == -signal.SIGKILL
    assert _wait_gone([grandchild.pid], 2) == []


def test_a_child_started_from_a_thread_outlives_the_thread():
    # PR_SET_PDEATHSIG fired when the *thread* that forked the child exited
    import threading

    child = Child("sleeper", python("import time; time.sleep(60)"))
    thread = threading.Thread(target=child.start)
    thread.start()
    thread.join()
    time.sleep(0.5)
    try:
        assert child.alive()
    finally:
        child.stop(2)


def test_the_watchdog_kills_the_groups_when_serve_exits():
    from sagemaker_serving.launcher.watchdog import Watchdog

    watchdog = Watchdog()
    watchdog.start()
    child, grandchild = _spawner(60, watchdog=watchdog)
    # closing the pipe stands in for serve's exit: if any child had inherited the write end,
    # the watchdog would never read end-of-file
    watchdog.stop()
    assert watchdog.proc is not None and watchdog.proc.returncode == 0
    assert _wait_gone([grandchild], 5) == []
    assert child.wait(5)


def test_the_watchdog_removes_serves_directories(tmp_path):
    from sagemaker_serving.launcher.watchdog import Watchdog

    directory = tmp_path / "sagemaker-serve-x"
    (directory / "sub").mkdir(parents=True)
    watchdog = Watchdog()
    watchdog.start()
    watchdog.remove_on_exit(directory)
    assert directory.exists()
    watchdog.stop()
    assert not directory.exists()


def test_a_dead_watchdog_is_replaced_and_knows_every_group():
    from sagemaker_serving.launcher.watchdog import Watchdog

    watchdog = Watchdog()
    watchdog.start()
    child, grandchild = _spawner(60, watchdog=watchdog)
    supervisor = Supervisor([child], watchdog=watchdog)
    assert watchdog.proc is not None
    first = watchdog.proc
    first.kill()
    first.wait(5)
    assert not _gone(grandchild)  # a killed watchdog kills nothing: the groups live on
    assert supervisor.check() is None
    assert watchdog.alive() and watchdog.proc is not first
    watchdog.stop()  # the new one kills the group it was told about at its start
    assert _wait_gone([grandchild], 5) == []
    assert child.wait(5)


def test_the_watchdog_forgets_a_group_serve_has_reaped():
    # a reaped group's id may be reused by an unrelated process: it must not be killed
    from sagemaker_serving.launcher.watchdog import parse

    groups: set[int] = set()
    parse([b"+100", b"+200", b"-100", b"", b"+x", b"+1", b"*300", b"+0"], groups)
    assert groups == {200}


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
def test_nothing_outlives_a_dead_serve(signum):
    import subprocess

    serve = subprocess.Popen([*python(SERVE_STAND_IN), SPAWNER], stdout=subprocess.PIPE, text=True)
    descendants: list[psutil.Process] = []
    try:
        assert serve.stdout is not None and serve.stdout.readline().strip() == "started"
        # the watchdog, 2 children and their 2 children
        descendants = _grandchildren(serve.pid, 5)
        serve.send_signal(signum)
        serve.wait(10)
        assert _wait_gone([p.pid for p in descendants], 5) == []
    finally:
        serve.kill()
        serve.wait(10)
        for process in descendants:  # when the test failed
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
