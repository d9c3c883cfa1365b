"""Requests nginx answers itself (the njs fast path, /ping, its own errors) in /metrics.

nginx writes one syslog datagram per such request to a loopback UDP port: `secret route
status model seconds` (the run's secret: service_access.py; anything without it is dropped).
UDP, not a unix socket: Linux queues at most net.unix.max_dgram_qlen (10) datagrams on a unix
datagram socket and nginx drops what does not fit, which lost hundreds of counts a minute
under load; a UDP socket queues up to its receive buffer (RECEIVE_BUFFER, capped by
net.core.rmem_max: about 500 datagrams by default), and lost none in the same test. Each
gunicorn worker counts what it receives in its own Prometheus values (multiprocess mode adds
them up), so /metrics covers every request of the front door. Nothing runs in the gunicorn
master: a thread there could hold prometheus_client's lock while the master forks a worker,
which would then wait for it forever.
"""

from __future__ import annotations

import hmac
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass

from sagemaker_serving.service.metrics import ServiceMetrics

log = logging.getLogger(__name__)

SYSLOG_TAG = "tfs_metrics"
ROUTES = frozenset({"/invocations", "/ping", "/execution-parameters", "/metrics", "other"})
FORGED_REPORT_SECONDS = 60.0
_MAX_DATAGRAM = 4096
LOOPBACK = "127.0.0.1"
RECEIVE_BUFFER = 4 << 20  # asked for; Linux grants up to twice net.core.rmem_max
# The receiver wakes once per batch, not per datagram (a thread wake-up costs about ten times
# the 2-3 us of counting one): after a small batch it pauses for as long as SAFE_RATE
# datagrams/s would take to fill the buffer the kernel granted (5 ms for Linux's default
# ~500 datagrams, 20 ms at most); after a large batch it reads on.
SMALL_BATCH = 32
MAX_BATCH = 256
DATAGRAM_BYTES = 1024  # receive-buffer memory one datagram takes, rounded up (832 measured)
SAFE_RATE = 80_000
MIN_PAUSE, MAX_PAUSE = 0.005, 0.02


@dataclass(frozen=True)
class FrontRequest:
    """One request nginx answered."""

    route: str
    status: int
    model: str
    seconds: float


def split_datagram(data: bytes) -> tuple[bytes, bytes] | None:
    """`<PRI>Mon DD HH:MM:SS tfs_metrics: secret rest` -> (secret, rest)."""
    _, marker, message = data.partition(SYSLOG_TAG.encode() + b": ")
    if not marker:
        return None
    secret, _, rest = message.partition(b" ")
    return secret, rest


def parse_request(rest: bytes) -> FrontRequest | None:
    """`route status model seconds` (the model may hold spaces) -> its fields, checked."""
    fields = rest.decode("utf-8", errors="replace").strip().split(" ")
    if len(fields) < 4:
        return None
    route, status, seconds = fields[0], fields[1], fields[-1]
    model = " ".join(fields[2:-1])
    try:
        code, elapsed = int(status), float(seconds)
    except ValueError:
        return None
    if not 100 <= code <= 599 or not math.isfinite(elapsed) or elapsed < 0:
        return None
    return FrontRequest(
        route if route in ROUTES else "other", code, "" if model == "-" else model, elapsed
    )


def nginx_access_log(port: int) -> str:
    """The nginx directive sending the datagrams (log_format sagemaker_metrics: template)."""
    return (
        f"    access_log syslog:server={LOOPBACK}:{port},nohostname,tag={SYSLOG_TAG} "
        "sagemaker_metrics if=$metrics_from_nginx;"
    )


def pause_seconds(receive_buffer: int) -> float:
    """The receiver's pause after a small batch, for a receive buffer of that many bytes."""
    return min(MAX_PAUSE, max(MIN_PAUSE, receive_buffer // DATAGRAM_BYTES / SAFE_RATE))


def bind_socket() -> socket.socket:
    """The datagram socket nginx sends to, on a free loopback port; serve binds it before
    nginx starts (no lost or refused datagrams) and hands it to each Python service process
    it starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.bind((LOOPBACK, 0))
    sock.set_inheritable(True)
    return sock


class FrontMetricsReceiver:
    """Counts what arrives on the (inherited) socket, on a daemon thread of a worker;
    datagrams without the run's secret are dropped and reported at most once a minute."""

    def __init__(self, sock: socket.socket, metrics: ServiceMetrics, token: str) -> None:
        self.sock = sock
        self.metrics = metrics
        self.token = token.encode()
        self.forged = 0
        self._reported_at = -math.inf
        self.pause = MIN_PAUSE  # start() sets it for the socket's buffer
        self.thread = threading.Thread(target=self._serve, name="front-metrics", daemon=True)

    def start(self) -> FrontMetricsReceiver:
        self.pause = pause_seconds(self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        self.thread.start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                batch = self._drain()
            except OSError:
                return  # closed
            for data in batch:
                self.handle(data)
            if len(batch) < SMALL_BATCH:
                time.sleep(self.pause)  # let a few arrive: one wake-up for many requests

    def _drain(self) -> list[bytes]:
        """Every datagram queued (at least one, waiting for it), up to MAX_BATCH."""
        batch = [self.sock.recv(_MAX_DATAGRAM)]
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self.sock.recv(_MAX_DATAGRAM, socket.MSG_DONTWAIT))
            except BlockingIOError:
                break
        return batch

    def handle(self, data: bytes) -> None:
        parts = split_datagram(data)
        if parts is None or not hmac.compare_digest(parts[0], self.token):
            self._forged()
            return
        request = parse_request(parts[1])
        if request is None:
            log.warning("unreadable metrics datagram from nginx: %r", parts[1][:200])
            return
        self.metrics.request(request.route, request.status, request.model, request.seconds)

    def _forged(self) -> None:
        self.forged += 1
        now = time.monotonic()
        if now - self._reported_at >= FORGED_REPORT_SECONDS:
            log.warning(
                "dropped %d metrics datagram(s) without this run's secret (not from our nginx)",
                self.forged,
            )
            self.forged = 0
            self._reported_at = now

    def close(self) -> None:
        self.sock.close()
