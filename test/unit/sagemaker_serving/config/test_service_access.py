"""Who may use the Python service's sockets: modes, the nginx `user`, the run's secret."""

from __future__ import annotations

import os
import stat

import pytest

from sagemaker_serving.config import access as service_access
from sagemaker_serving.config.access import (
    new_access,
    read_token,
    socket_dir,
    token_fd,
    write_private,
)


def test_not_root_everything_is_for_serves_own_user(monkeypatch):
    monkeypatch.setattr(service_access.os, "geteuid", lambda: 1000)
    access = new_access()
    assert access.group is None and access.nginx_user == ""
    assert access.socket_mode == 0o600 and access.umask == 0o177
    folder = socket_dir(access)
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        folder.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_as_root_root_and_the_workers_group_only():
    import grp
    import pwd

    nobody = pwd.getpwnam("nobody")
    access = new_access()
    assert access.group == nobody.pw_gid
    assert access.nginx_user == f"user nobody {grp.getgrgid(nobody.pw_gid).gr_name};"
    assert access.socket_mode == 0o660 and access.umask == 0o117
    folder = socket_dir(access)
    try:
        info = folder.stat()
        assert stat.S_IMODE(info.st_mode) == 0o2710
        assert (info.st_uid, info.st_gid) == (0, nobody.pw_gid)
    finally:
        folder.rmdir()


def test_the_secret_is_fresh_and_not_in_its_repr():
    first, second = new_access(), new_access()
    assert first.token != second.token and len(first.token) >= 40
    assert first.token not in repr(first)


def test_the_token_fd_can_be_read_at_every_restart():
    fd = token_fd("the-secret")
    try:
        assert read_token(fd) == read_token(fd) == "the-secret"
    finally:
        os.close(fd)


def test_write_private_makes_the_file_0600_even_over_a_wider_one(tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "new secret")
    assert path.read_text() == "new secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
