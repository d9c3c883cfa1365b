"""The watchdog: when serve is gone (its pipe reads end-of-file), it SIGKILLs the process groups
serve still listed and removes serve's temporary directories."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sagemaker_serving.launcher.watchdog import IGNORED_SIGNALS, Watchdog, kill_groups, parse


def ignored_signals(pid: int) -> set[int]:
    """The signals process `pid` ignores (/proc/PID/status, SigIgn)."""
    with open(f"/proc/{pid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigIgn:"))
    return {signum for signum in range(1, 65) if mask & (1 << (signum - 1))}


def wait_ignoring(pid: int, signals: set[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not signals <= ignored_signals(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_watchdog_kills_the_groups_when_serve_exits(tree):
    watchdog = Watchdog()
    watchdog.start()
    child, grandchild = tree.spawner(60, watchdog=watchdog)
    # closing the pipe stands in for serve's exit: if any child had inherited the write end,
    # the watchdog would never read end-of-file
    watchdog.stop()
    assert watchdog.proc is not None and watchdog.proc.returncode == 0
    assert tree.wait_gone([grandchild], 5) == []
    assert child.wait(5)


def test_a_group_serve_has_reaped_is_left_alone(tree):
    watchdog = Watchdog()
    watchdog.start()
    child, grandchild = tree.spawner(60, watchdog=watchdog)
    assert child.pid is not None
    watchdog.forget(child.pid)
    watchdog.stop()
    assert tree.wait_gone([grandchild], 0) == [grandchild]
    child.stop(5)


def test_the_watchdog_removes_serves_directories(tmp_path):
    directory = tmp_path / "sagemaker-serve-x"
    (directory / "sub").mkdir(parents=True)
    watchdog = Watchdog()
    watchdog.start()
    watchdog.remove_on_exit(directory)
    assert directory.exists()
    watchdog.stop()
    assert not directory.exists()


def test_the_watchdog_ignores_the_signals_meant_for_serve(tmp_path):
    watchdog = Watchdog()
    watchdog.start()
    assert watchdog.proc is not None
    directory = tmp_path / "kept-until-the-end"
    directory.mkdir()
    watchdog.remove_on_exit(directory)
    assert wait_ignoring(watchdog.proc.pid, set(IGNORED_SIGNALS))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        watchdog.proc.send_signal(signum)
    watchdog.track(os.getpid() + 10**6)  # still reading: the pipe is open and it runs on
    assert watchdog.alive()
    watchdog.stop()
    assert watchdog.proc.returncode == 0 and not directory.exists()


def test_parse_applies_additions_removals_and_directories():
    # a reaped group's id may be reused by an unrelated process: it must not be killed
    groups: set[int] = set()
    directories: list[str] = []
    lines = [b"+100", b"+200", b"-100", b"", b"+x", b"+1", b"*300", b"+0", b"d/tmp/a", b"drel"]
    parse(lines, groups, directories)
    assert groups == {200}
    assert directories == ["/tmp/a"]


def test_kill_groups_skips_groups_that_are_gone():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait(10)
    kill_groups({proc.pid, gone.pid})
    assert proc.wait(10) == -signal.SIGKILL
