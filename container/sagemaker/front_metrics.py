"""Requests nginx answers itself (the njs fast path, /ping, its own errors) in /metrics.

nginx writes one syslog datagram per such request to a unix socket: `route status model
seconds`. A thread in the Python service's gunicorn master counts them in the same
Prometheus metrics the workers use, so /metrics covers every request of the front door.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from pathlib import Path

from .service_metrics import ServiceMetrics

log = logging.getLogger(__name__)

SYSLOG_TAG = "tfs_metrics"
_MAX_DATAGRAM = 4096


def parse_datagram(data: bytes) -> tuple[str, int, str, float] | None:
    """`<PRI>Mon DD HH:MM:SS tfs_metrics: route status model seconds` -> its fields."""
    _, marker, message = data.partition(SYSLOG_TAG.encode() + b": ")
    if not marker:
        return None
    fields = message.decode("utf-8", errors="replace").split()
    if len(fields) != 4:
        return None
    route, status, model, seconds = fields
    try:
        return route, int(status), "" if model == "-" else model, float(seconds)
    except ValueError:
        return None


def nginx_access_log(path: Path) -> str:
    """The nginx directive sending the datagrams (log_format sagemaker_metrics: template)."""
    return (
        f"    access_log syslog:server=unix:{path},nohostname,tag={SYSLOG_TAG} "
        "sagemaker_metrics if=$metrics_from_nginx;"
    )


def bind_socket(path: Path) -> socket.socket:
    """The datagram socket nginx sends to; serve binds it before nginx starts (no lost or
    refused datagrams) and hands it to each Python service process it starts."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by an earlier run
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    os.chmod(path, 0o666)  # nginx workers may run as another user
    sock.set_inheritable(True)
    return sock


class FrontMetricsReceiver:
    """Counts what arrives on the (inherited) socket, on a daemon thread."""

    def __init__(self, sock: socket.socket, metrics: ServiceMetrics) -> None:
        self.sock = sock
        self.metrics = metrics
        self.thread = threading.Thread(target=self._serve, name="front-metrics", daemon=True)

    def start(self) -> FrontMetricsReceiver:
        self.thread.start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MAX_DATAGRAM)
            except OSError:
                return  # closed
            parsed = parse_datagram(data)
            if parsed is None:
                log.warning("unreadable metrics datagram from nginx: %r", data[:200])
                continue
            route, status, model, seconds = parsed
            self.metrics.request(route, status, model, seconds)

    def close(self) -> None:
        self.sock.close()
