"""Who may use the Python service's sockets: modes, nginx's `user`, private files."""

from __future__ import annotations

import stat

from sagemaker_serving.config import access as service_access
from sagemaker_serving.config.access import write_private


def test_gunicorns_socket_is_for_serves_own_user():
    assert service_access.SOCKET_UMASK == 0o177  # 0600 (its folder: test_service_process)


def test_nginx_workers_run_as_serves_user(monkeypatch):
    """As root, nginx would switch its workers to `nobody` (whom any local user may run as):
    they stay root, as the rest of the stack."""
    monkeypatch.setattr(service_access.os, "geteuid", lambda: 1000)
    assert service_access.nginx_user() == ""
    monkeypatch.setattr(service_access.os, "geteuid", lambda: 0)
    assert service_access.nginx_user().startswith("user root ")


def test_write_private_makes_the_file_0600_even_over_a_wider_one(tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "new secret")
    assert path.read_text() == "new secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
