"""Who may use the stack's internal sockets and ports: the stack's own processes, nothing else.

The stack runs as one user, serve's: nginx's workers too (as root, nginx is told to keep its
workers root rather than switch to `nobody`), the Python service, the handler processes and the
model servers. So file modes keep every other user out of the sockets (a 0700 directory, 0600
sockets), and the model servers close TCP connections from processes of other users at accept
(docker/loopback_guard.c). Run serve as an unprivileged user to keep the stack unprivileged.

The per-run secret: nginx adds it to every request it proxies to the service, and serve to every
report of nginx's requests it relays to a loopback UDP port any local user can send to
(front_log_relay.py); the service answers 403 to requests without it and drops such reports. It
reaches nginx in its config (0600) and the service through an inherited file descriptor: never
argv, the environment or a world-readable file.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import tempfile
from pathlib import Path

TOKEN_HEADER = "X-Sagemaker-Serving-Token"  # nginx.conf.template sets it on every service hop
SOCKET_UMASK = 0o177  # gunicorn's: its unix socket is 0600


def new_token() -> str:
    return secrets.token_urlsafe(32)


def nginx_user() -> str:
    """nginx.conf's `user` directive: as root, nginx's workers stay root (nginx would switch
    them to `nobody`, whom any local user may run as); otherwise none (they run as serve)."""
    if os.geteuid() != 0:
        return ""
    return f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};"


def socket_dir() -> Path:
    """A new 0700 directory for the service's socket (and nginx's temporary files)."""
    return Path(tempfile.mkdtemp(prefix="sagemaker-service-"))


def token_fd(token: str) -> int:
    """An anonymous in-memory file holding the secret, for the service to inherit."""
    fd = os.memfd_create("sagemaker-serving-token")
    os.write(fd, token.encode())
    return fd


def read_token(fd: int) -> str:
    """The secret from an inherited token_fd (from its start: it is read at every restart)."""
    token = os.pread(fd, 4096, 0).decode().strip()
    if not token:
        raise ValueError(f"file descriptor {fd} holds no token")
    return token


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (nginx.conf holds the secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # an older file of the same name may have been wider
        out.write(text)
