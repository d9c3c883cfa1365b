"""process_utils.no_dump: a process that is not dumpable, and a program exec'd so that it
cannot make itself dumpable again (nginx's workers do, after they change user)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

import pytest

from process_utils import no_dump


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip()


def test_make_non_dumpable():
    code = "from process_utils import no_dump as n; n.make_non_dumpable(); print(n.is_dumpable())"
    assert run(code) == "False"


def test_under_the_filter_setting_dumpable_does_nothing():
    code = (
        "from process_utils import no_dump as n\n"
        "n.make_non_dumpable()\n"
        "assert n.forbid_dumpable()\n"
        "print(n._prctl(n.PR_SET_DUMPABLE, 1), n.is_dumpable())\n"
    )
    assert run(code) == "0 False"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing user needs root")
def test_the_launcher_execs_the_program_under_the_filter():
    """The program the launcher execs (here Python, as nginx would be) changes user, as
    nginx's workers do, which makes it non-dumpable; its prctl(PR_SET_DUMPABLE, 1) then
    does nothing (without the launcher it makes the process dumpable again)."""
    nobody = pwd.getpwnam("nobody")
    probe = (
        "import os; from process_utils import no_dump as n; "
        f"os.setgid({nobody.pw_gid}); os.setuid({nobody.pw_uid}); "
        "n._prctl(n.PR_SET_DUMPABLE, 1); print(n.is_dumpable())"
    )
    argv = [sys.executable, "-c", probe]
    for command, dumpable in ((no_dump.command(argv), "False"), (argv, "True")):
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=60, check=True, cwd="/"
        )
        assert result.stdout.strip() == dumpable, (command, result.stderr)
