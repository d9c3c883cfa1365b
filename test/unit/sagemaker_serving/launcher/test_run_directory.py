"""The run directory is the serving user's alone: what another user made or can change is
refused (everything in it is run as the serving user)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sagemaker_serving.launcher.run_directory import (
    NoTemporaryDirectory,
    UnsafeRunDirectory,
    check,
    prepare,
)

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")


def shared_tmp(tmp_path: Path) -> Path:
    """A world-writable, sticky directory, as /tmp is."""
    parent = tmp_path / "tmp"
    parent.mkdir()
    parent.chmod(0o1777)
    return parent


def test_a_missing_directory_is_made_private(tmp_path):
    run = prepare(shared_tmp(tmp_path) / "run")
    assert stat.S_IMODE(run.stat().st_mode) == 0o700 and run.stat().st_uid == os.geteuid()


def test_no_writable_temporary_directory_says_what_to_do(monkeypatch):
    """`docker run --read-only` without a tmpfs: tempfile finds no usable directory; the
    StartupError names the fix, not a bare errno and a list of paths."""

    def read_only(**_: object) -> str:
        raise FileNotFoundError(2, "No usable temporary directory found in ['/tmp', '/var/tmp']")

    monkeypatch.setattr("tempfile.mkdtemp", read_only)
    with pytest.raises(NoTemporaryDirectory, match=r"--tmpfs /tmp.*or set TMPDIR"):
        prepare(None)


def test_an_own_directory_is_taken(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    (run / "container-site").mkdir()
    assert prepare(run) == run.resolve()


@as_root
def test_a_directory_another_user_made_first_is_refused(tmp_path):
    run = shared_tmp(tmp_path) / "run"
    run.mkdir()
    os.chown(run, NOBODY, NOBODY)  # made by nobody before serve started
    with pytest.raises(UnsafeRunDirectory, match=f"belongs to uid {NOBODY}"):
        prepare(run)


@as_root
def test_a_directory_inside_it_of_another_user_is_refused(tmp_path):
    run = tmp_path / "run"
    (run / "multi-model" / "environments").mkdir(parents=True)
    os.chown(run / "multi-model", NOBODY, NOBODY)
    with pytest.raises(UnsafeRunDirectory, match="multi-model belongs to uid"):
        prepare(run)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_directory_others_may_write_to_is_refused(tmp_path, mode):
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(mode)
    with pytest.raises(UnsafeRunDirectory, match="writable by other users"):
        check(run)


def test_a_parent_where_others_could_swap_it_is_refused(tmp_path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)  # no sticky bit: anyone may rename what is in it
    with pytest.raises(UnsafeRunDirectory, match="above it is writable by other users"):
        prepare(parent / "run")
