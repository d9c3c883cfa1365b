"""The Makefile's recipes, as `make -n` prints them (nothing is run)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> list[str]:
    done = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return done.stdout.splitlines()


def test_make_install_shows_progress_what_it_installs_and_how_large():
    lines = dry_run("-W", "setup.py", "install")  # as if setup.py had changed
    pip = [line for line in lines if " install " in line and "/pip " in line]
    assert len(pip) == 2 and not any("--quiet" in line or " -q" in line for line in pip), pip
    said = "\n".join(line for line in lines if line.startswith("echo "))
    assert "TensorFlow" in said and "GB" in said, said  # what, and about how much
    assert any("du -sh .venv" in line for line in lines), lines  # and what it took


def test_make_serve_builds_the_example_model_with_two_versions_quietly():
    lines = dry_run("-B", "-o", ".venv/.installed", "example-model")  # its recipe, whole
    build = "\n".join(lines)
    assert "half_plus_two run/models/half_plus_three.tmp --version 123" in build
    assert "half_plus_three run/models/half_plus_three.tmp --version 124" in build
    assert "> run/example-model.log 2>&1" in build  # TensorFlow's output only on a failure
