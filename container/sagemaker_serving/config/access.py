"""Who may use the stack's internal sockets and ports: the stack's own processes, nothing else.

The stack runs as one user, serve's: nginx's workers too (as root, nginx is told to keep its
workers root rather than switch to `nobody`), the Python service, the handler processes and the
model servers. So file modes keep every other user out of the sockets (a 0700 directory, 0600
sockets), and the model servers close TCP connections from processes of other users at accept
(docker/loopback_guard.c). Run serve as an unprivileged user to keep the stack unprivileged.
"""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path

SOCKET_UMASK = 0o177  # gunicorn's: its unix socket is 0600


def nginx_user() -> str:
    """nginx.conf's `user` directive: as root, nginx's workers stay root (nginx would switch
    them to `nobody`, whom any local user may run as); otherwise none (they run as serve)."""
    if os.geteuid() != 0:
        return ""
    return f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};"


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (a run's config)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # an older file of the same name may have been wider
        out.write(text)
