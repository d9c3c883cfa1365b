"""The front port (nginx's, SAGEMAKER_BIND_TO_PORT): free before anything starts, and
listened on by our own nginx before serve says it is ready."""

from __future__ import annotations

import contextlib
import errno
import socket

import psutil

from sagemaker_serving.errors import StartupError


class FrontPortError(StartupError):
    """The front port cannot be ours; the message names it and the setting that moves it."""


def check_front_port(host: str, port: int) -> None:
    """FrontPortError when `port` cannot be bound on `host` ("" or 0.0.0.0: every address):
    something else listens there. Probed as nginx binds (SO_REUSEADDR, so a closing
    connection's TIME_WAIT does not count) and closed at once."""
    address = host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                reason = "something else listens there (another serve?)"
            else:
                reason = err.strerror or str(err)
            raise FrontPortError(
                f"port {port} on {address} is not free: {reason}; stop what holds it, or set "
                f"SAGEMAKER_BIND_TO_PORT to a free port"
            ) from None


def listening(pid: int | None, port: int) -> bool:
    """True once process `pid` (nginx's master) holds a listening TCP socket on `port`."""
    if pid is None:
        return False
    with contextlib.suppress(psutil.Error):
        return any(
            conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
            for conn in psutil.Process(pid).net_connections(kind="tcp")
        )
    return False
