"""process_utils.tree: everything under a process, a double fork and a new session included."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

from process_utils import tree

# becomes a subreaper, starts a child that double-forks a `sleep` into a session of its own,
# and prints what it finds under itself before and after killing it all
SCRIPT = """
import json, os, subprocess, sys, time
from process_utils import tree

assert tree.become_subreaper()
subprocess.run([sys.executable, "-c",
    "import subprocess; subprocess.Popen(['sleep', '600'], start_new_session=True)"], check=True)
time.sleep(0.2)
under = tree.descendants(os.getpid())
killed = tree.kill_all(under, time.monotonic() + 5)
time.sleep(0.2)
left = [p for p in tree.descendants(os.getpid()) if tree.alive(p)]
print(json.dumps({"under": [list(p) for p in under], "killed": killed, "left": len(left)}))
"""


def test_a_subreaper_finds_and_kills_a_double_forked_daemon():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    doc = json.loads(result.stdout)
    ((pid, start),) = doc["under"]  # the daemon, adopted: its parent exited
    assert doc["killed"] == 1 and doc["left"] == 0
    assert not tree.alive(tree.Proc(pid, start))


def test_a_pid_used_again_is_not_the_same_process():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        me = tree.proc(sleeper.pid)
        assert me is not None and tree.alive(me)
        assert not tree.alive(tree.Proc(sleeper.pid, me.start + 1))
        assert tree.kill_all([tree.Proc(sleeper.pid, me.start + 1)], time.monotonic() + 1) == 0
        assert psutil.Process(sleeper.pid).is_running()
    finally:
        sleeper.kill()
        sleeper.wait()
