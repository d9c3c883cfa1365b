"""Every request in /metrics, counted once, when nginx sends its answer.

nginx logs a line per request, `route status model seconds` (the model percent-encoded), to
a buffered file that
serve relays (front_log_relay.py) to a loopback UDP port in reports: datagrams of whole lines
after a first line holding the run's secret (config/access.py; a datagram without it is
dropped). UDP, not a unix socket: Linux queues at most net.unix.max_dgram_qlen (10)
datagrams on a unix datagram socket; a UDP socket queues up to its receive buffer
(RECEIVE_BUFFER, capped by net.core.rmem_max: seconds of reports). Each gunicorn worker counts
what it receives in its own Prometheus values (multiprocess mode adds them up), so /metrics
covers every request of the front door. Nothing runs in the gunicorn master: a thread there
could hold prometheus_client's lock while the master forks a worker, which would then wait
for it forever.
"""

from __future__ import annotations

import hmac
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote

from sagemaker_serving.service.metrics import ServiceMetrics

log = logging.getLogger(__name__)

ROUTES = frozenset(
    {"/invocations", "/models", "/ping", "/execution-parameters", "/metrics", "other"}
)
FORGED_REPORT_SECONDS = 60.0
REPORT_BYTES = 32 * 1024  # at most, per datagram
# a multi-model name of 1024 characters is 12 KB percent-encoded (3-byte UTF-8 characters)
MAX_LINE = 16 * 1024
LOOPBACK = "127.0.0.1"
RECEIVE_BUFFER = 4 << 20  # asked for; Linux grants up to twice net.core.rmem_max


@dataclass(frozen=True)
class FrontRequest:
    """One request nginx answered."""

    route: str
    status: int
    model: str
    seconds: float


def reports(token: str, lines: list[bytes]) -> list[bytes]:
    """`lines` (nginx's, without their newlines) as datagrams of at most REPORT_BYTES: the
    secret, then whole lines (a line is cut at MAX_LINE: nginx's are shorter)."""
    head = token.encode() + b"\n"
    out: list[bytes] = []
    batch: list[bytes] = []
    size = len(head)
    for line in lines:
        line = line[:MAX_LINE]
        if batch and size + len(line) > REPORT_BYTES:
            out.append(head + b"\n".join(batch))
            batch, size = [], len(head)
        batch.append(line)
        size += len(line) + 1
    if batch:
        out.append(head + b"\n".join(batch))
    return out


def split_report(data: bytes) -> tuple[bytes, list[bytes]]:
    """A report -> (its secret, its lines)."""
    secret, _, rest = data.partition(b"\n")
    return secret, rest.split(b"\n") if rest else []


def parse_request(rest: bytes) -> FrontRequest | None:
    """`route status model seconds` (the model percent-encoded; `-` for none) -> its fields,
    checked."""
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
        route if route in ROUTES else "other", code, "" if model == "-" else unquote(model), elapsed
    )


def bind_socket(port: int = 0) -> socket.socket:
    """The datagram socket serve's relay sends to, on loopback `port` (0: a free one); serve
    binds it once and hands it to each Python service process it starts (reports wait in it
    while a service restarts)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.bind((LOOPBACK, port))
    sock.set_inheritable(True)
    return sock


class FrontMetricsReceiver:
    """Counts what arrives on the (inherited) socket, on a daemon thread of a worker;
    reports without the run's secret are dropped and reported at most once a minute."""

    def __init__(self, sock: socket.socket, metrics: ServiceMetrics, token: str) -> None:
        self.sock = sock
        self.metrics = metrics
        self.token = token.encode()
        self.forged = 0
        self._reported_at = -math.inf
        self.thread = threading.Thread(target=self._serve, name="front-metrics", daemon=True)

    def start(self) -> FrontMetricsReceiver:
        self.thread.start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                data = self.sock.recv(REPORT_BYTES)
            except OSError:
                return  # closed
            self.handle(data)

    def handle(self, data: bytes) -> None:
        secret, lines = split_report(data)
        if not hmac.compare_digest(secret, self.token):
            self._forged()
            return
        for line in lines:
            request = parse_request(line)
            if request is None:
                log.warning("unreadable request line from nginx's log: %r", line[:200])
                continue
            self.metrics.request(request.route, request.status, request.model, request.seconds)

    def _forged(self) -> None:
        self.forged += 1
        now = time.monotonic()
        if now - self._reported_at >= FORGED_REPORT_SECONDS:
            log.warning(
                "dropped %d metrics report(s) without this run's secret (not from our nginx)",
                self.forged,
            )
            self.forged = 0
            self._reported_at = now

    def close(self) -> None:
        self.sock.close()
