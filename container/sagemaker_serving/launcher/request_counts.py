"""Every request in /metrics, counted once, when nginx sends its answer (whoever made it: the
Python service, the model server a TF Serving request went straight to, nginx's own errors).

nginx writes a line per request (`status seconds uri attributes`, nginx.conf.j2's
`sagemaker_counts`) to a pipe only serve reads (an inherited descriptor: no file, no port),
a batch of lines at a time, within COUNTS_FLUSH_SECONDS (a write per request cost serve a
wake-up per request);
serve counts each in the Prometheus values the service's /metrics shows (multiprocess mode:
its values beside the workers' own, in the run's metrics folder).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import re
import threading
from urllib.parse import unquote

from sagemaker_serving.config.routing_rules import HEADER
from sagemaker_serving.errors import StatusError
from sagemaker_serving.service.routing import parse_route

log = logging.getLogger(__name__)

MODELS = "/models"
INVOKE = "/invoke"
ROUTES = {"/invocations", "/ping", "/execution-parameters", "/metrics"}
_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")  # nginx's escape of a byte in a logged value
COUNTS_FLUSH_SECONDS = 0.5  # nginx's longest wait before it writes the lines it holds
PIPE_BYTES = 1 << 20  # asked for (F_SETPIPE_SZ): seconds of lines at thousands of requests/s


# the line nginx writes for each request (nginx.conf.j2's log_format)
COUNTS_LOG_FORMAT = "$status $request_time $request_uri $http_" + HEADER.lower().replace("-", "_")


def counted(line: bytes, default_model: str) -> tuple[str, int, str, float] | None:
    """(route, status, model, seconds) of a line, None when it is not one of nginx's."""
    status, _, rest = line.partition(b" ")
    seconds, _, rest = rest.partition(b" ")
    uri, _, attributes = rest.partition(b" ")
    try:
        code, elapsed = int(status), float(seconds)
    except ValueError:
        return None
    route, model = _route(uri, attributes, default_model)
    return route, code, model, elapsed


@functools.lru_cache(maxsize=4096)  # a request's line mostly repeats another's
def _route(uri: bytes, attributes: bytes, default_model: str) -> tuple[str, str]:
    """(route, model) of a request's URI and custom attributes, as nginx logged them."""
    raw = uri.decode("latin-1").split("?", 1)[0]
    path = unquote(raw)
    if raw.startswith(MODELS + "/"):  # a multi-model name is the raw path, percent-decoded
        name = raw[len(MODELS) + 1 :]
        invoke = name.endswith(INVOKE)
        model = unquote(name[: -len(INVOKE)] if invoke else name)
        return ("/invocations" if invoke else MODELS), model
    if path == MODELS:
        return MODELS, ""
    if path == "/invocations":
        header = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), attributes)
        text = header.decode("utf-8", "replace")
        try:
            model = parse_route(None if text == "-" else text, default_model).model
        except StatusError:
            model = ""  # a 400 for its attributes
        return "/invocations", model
    return (path if path in ROUTES else "other"), ""


class RequestCounts:
    """serve's end of nginx's request pipe: a thread that counts each line in the metrics."""

    def __init__(self, metrics_dir: str, default_model: str) -> None:
        self.default_model = default_model
        self.read_fd, self.write_fd = os.pipe()  # nginx inherits the write end
        os.set_inheritable(self.write_fd, True)
        with contextlib.suppress(OSError):  # else the default, 64 KiB
            fcntl.fcntl(self.write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before prometheus_client loads
        from sagemaker_serving.service.metrics import ServiceMetrics

        self.metrics = ServiceMetrics()
        self.unanswered = 0  # requests nginx ended without an answer (status 000)
        self._thread = threading.Thread(target=self._count, name="request-counts", daemon=True)

    @property
    def nginx_path(self) -> str:
        """The path nginx writes its lines to (its inherited end of the pipe)."""
        return f"/dev/fd/{self.write_fd}"

    def start(self) -> None:
        self._thread.start()

    def _count(self) -> None:
        pending = b""
        while chunk := os.read(self.read_fd, 1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                request = counted(line, self.default_model)
                if request is not None:
                    self.metrics.request(*request)
                    self.unanswered += request[1] == 0
        self.metrics.flush()

    def stop(self) -> None:
        """After nginx stopped (nobody else writes any more): what is left counted."""
        with contextlib.suppress(OSError):
            os.close(self.write_fd)
        self._thread.join(5)
        self.metrics.flush()
