"""Who may use the Python service's sockets: the stack's own nginx workers, nothing else.

File modes keep other users out: a 0700 directory when nginx's workers run as serve's own
user (serve is not root); as root, nginx's workers run as `nobody`, so the directory and the
sockets belong to root and the workers' group. Another process of that user passes both
checks, so nginx adds a per-run secret to every request it proxies to the service, and serve
to every report of nginx's requests it relays (front_log_relay.py); the service answers 403 to
requests without it and drops such reports. The secret reaches nginx in its config (0600)
and the service through an inherited file descriptor: never argv, the environment or a
world-readable file.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

NGINX_WORKER_USER = "nobody"  # nginx's default `user` when its master runs as root
TOKEN_HEADER = "X-Sagemaker-Serving-Token"  # nginx.conf.template sets it on every service hop


@dataclass(frozen=True)
class Access:
    """The run's secret and who nginx's workers are."""

    token: str = field(repr=False)
    group: int | None  # the workers' group when serve is root; None: they share serve's uid
    nginx_user: str  # the nginx.conf `user` directive ("" when serve is not root)

    @property
    def socket_mode(self) -> int:
        return 0o600 if self.group is None else 0o660

    @property
    def umask(self) -> int:
        """gunicorn's umask: its socket gets `socket_mode`."""
        return 0o777 & ~self.socket_mode


def new_access() -> Access:
    """A fresh secret; as root, nginx's workers as NGINX_WORKER_USER and its group."""
    token = secrets.token_urlsafe(32)
    if os.geteuid() != 0:
        return Access(token, None, "")
    try:
        user = pwd.getpwnam(NGINX_WORKER_USER)
        group = grp.getgrgid(user.pw_gid).gr_name
    except KeyError:
        raise OSError(f"no user {NGINX_WORKER_USER!r} (with a group) for nginx's workers") from None
    return Access(token, user.pw_gid, f"user {user.pw_name} {group};")


def socket_dir(access: Access) -> Path:
    """A new directory for the sockets: 0700, or (root) 2710 root:workers' group, whose
    setgid bit gives every socket made inside that group too."""
    path = Path(tempfile.mkdtemp(prefix="sagemaker-service-"))  # 0700
    if access.group is not None:
        os.chown(path, 0, access.group)
        path.chmod(0o2710)
    return path


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
