"""Is a model server up, and is a model AVAILABLE on it: the one home of both questions.

`version_states` reads TF Serving's model status answer (GET /v1/models/<model>) and
`all_available` decides on it; the service's readiness (`InstanceWatch`, what /ping answers)
and the multi-model manager (waiting for a load) both ask through them. `instance_ready`
probes one instance.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Collection, Mapping

PROMETHEUS_PATH = "/monitoring/prometheus/metrics"  # enabled on every instance serve starts
AVAILABLE = "AVAILABLE"
# Is an instance up, whatever it serves: the status of a model nobody loads (multi-model
# names are mme-<hash>) is a small JSON 404 from any TF Serving. Never the metrics page: it
# grows with every model an instance has seen (and nginx's probe would outgrow its buffer).
INSTANCE_PROBE_MODEL = "sagemaker-serving-probe"
READ_CHUNK = 1 << 16


def version_states(status: bytes | str) -> dict[int, str]:
    """{version: state} from a model status answer (`{"model_version_status": [...]}`)."""
    items = json.loads(status).get("model_version_status", [])
    return {int(item["version"]): item["state"] for item in items}


def version_error_codes(status: bytes | str) -> set[str]:
    """The status codes (names, such as RESOURCE_EXHAUSTED) of the versions a model status
    answer lists as failed."""
    items = json.loads(status).get("model_version_status", [])
    codes = {str(item.get("status", {}).get("error_code", "OK")) for item in items}
    return codes - {"OK", "0"}


def all_available(states: Mapping[int, str], versions: Collection[int] | None = None) -> bool:
    """True when each of `versions` (default: every version listed) is AVAILABLE; False when
    there is none to ask about."""
    wanted = states.keys() if versions is None else versions
    return bool(wanted) and all(states.get(version) == AVAILABLE for version in wanted)


def fetch(
    conn: http.client.HTTPConnection, path: str, deadline: float | None = None
) -> tuple[int, bytes]:
    """(status, body) of GET `path` on `conn` (closed after); OSError or HTTPException when
    nothing answered, TimeoutError past the connection's timeout or, however slowly the answer
    comes, once `deadline` (time.monotonic()) passes."""
    try:
        conn.request("GET", path)
        if deadline is None:
            reply = conn.getresponse()
            return reply.status, reply.read()
        sock = conn.sock  # the answer is read on it, even once `conn` lets it go

        def left() -> None:
            seconds = deadline - time.monotonic()
            if seconds <= 0:
                raise TimeoutError("the deadline passed before the whole answer came")
            if sock is not None:
                sock.settimeout(seconds)

        left()
        reply = conn.getresponse()
        body = bytearray()
        while True:
            left()
            if not (chunk := reply.read1(READ_CHUNK)):
                if reply.length:  # closed before the Content-Length it promised
                    raise http.client.IncompleteRead(bytes(body), reply.length)
                return reply.status, bytes(body)
            body += chunk
    finally:
        conn.close()


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes] | None:
    """`fetch`, or None when nothing answered."""
    try:
        return fetch(conn, path)
    except (OSError, http.client.HTTPException):
        return None


def instance_ready(rest_port: int, models: Collection[str] = (), timeout: float = 2.0) -> bool:
    """True when every version of each of `models` is AVAILABLE on the instance; without
    models, when it answers a model status request with its JSON (200, or 404 for a model it
    does not serve): its REST API is up, whatever it serves."""
    for model in models or [INSTANCE_PROBE_MODEL]:
        conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=timeout)
        status, body = get(conn, model_path(model)) or (0, b"")
        try:
            if models:
                ready = status == 200 and all_available(version_states(body))
            else:
                doc = json.loads(body) if status in (200, 404) else None
                ready = isinstance(doc, dict) and ("model_version_status" in doc or "error" in doc)
        except (ValueError, KeyError, TypeError, AttributeError):
            ready = False
        if not ready:
            return False
    return True


def model_path(model: str) -> str:
    """The REST path of a model's status."""
    return f"/v1/models/{model}"


PROC_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
TCP_LISTEN = "0A"


def listening_ports() -> set[int] | None:
    """The TCP ports with a listening socket in this network namespace; None without /proc."""
    ports: set[int] = set()
    found = False
    for path in PROC_TCP:
        try:
            with open(path) as table:
                lines = table.read().splitlines()[1:]
        except OSError:
            continue
        found = True
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == TCP_LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports if found else None


STARTING_EVERY = 0.05  # seconds between probe rounds until every instance was first up


class InstanceWatch:
    """Whether every model server instance is ready, known at once: a daemon thread asks each
    instance every `every` seconds, each question with its own `timeout`: are `models` all
    AVAILABLE there (a single-model endpoint), else does it answer at all (a multi-model one:
    instance_ready). An instance is down when its last round failed (refused,
    reset, not a status answer, a model not AVAILABLE) or when no round finished for `timeout`
    plus two rounds (it hangs). A model server busy loading models answers late, but it is up:
    /ping asks this, never the model server itself, so it answers within milliseconds
    whatever the loads do.

    The thread starts in each process that uses it (`start`, also on first use): a worker
    starts it as it makes its app, so its first /ping finds the probes' answers there (a first
    round that had to wait on a model server busy with a load answered 503)."""

    def __init__(
        self,
        rest_ports: Collection[int],
        models: Collection[str] = (),
        every: float = 0.5,
        timeout: float = 5.0,
    ):
        self.rest_ports = list(rest_ports)
        self.models = list(models)  # each AVAILABLE on each instance, else only it answers
        self.every = every
        self.timeout = timeout
        self._last: dict[int, tuple[float, bool]] = {}  # port -> (when it finished, up)
        self._started_in: int | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()

    def problem(self, wait: float = 1.0) -> str | None:
        """None when every instance is up; else what is not (waits up to `wait` s for the
        first round of probes in this process)."""
        self.start()
        self._first.wait(wait)
        now = time.monotonic()
        for index, port in enumerate(self.rest_ports):
            finished, up = self._last.get(port, (None, False))
            if finished is None:
                return f"model server instance {index} has not answered yet"
            if not up and self.models:
                models = ", ".join(self.models)
                return f"model server instance {index}: not every model is AVAILABLE ({models})"
            if not up:
                return f"model server instance {index} is not answering"
            if now - finished > self.timeout + 2 * self.every:
                return f"model server instance {index} has not answered for {now - finished:.0f} s"
        return None

    def refused(self) -> str | None:
        """None unless an instance's REST port has nobody listening now: an instance that died
        since the last probe is known at once. Asked of the kernel (/proc/net/tcp), not of the
        port: a connect per /ping would fill the accept queue of a model server busy with
        loads, and its probes would then time out."""
        listening = listening_ports()
        if listening is None:
            return None  # no /proc: the probes alone judge
        for index, port in enumerate(self.rest_ports):
            if port not in listening:
                return f"model server instance {index} is not listening"
        return None

    def started(self) -> bool:
        """Whether this process has the first round of answers (problem() need not wait)."""
        return self._started_in == os.getpid() and self._first.is_set()

    def start(self) -> None:
        with self._lock:
            if self._started_in == os.getpid():
                return
            self._started_in = os.getpid()
            self._last.clear()
            self._first.clear()
        threading.Thread(target=self._run, name="instance-watch", daemon=True).start()

    def _run(self) -> None:
        ever_up = False  # until then (start-up), ask every STARTING_EVERY: /ping's first 200
        while True:  # comes as soon as the models are, not up to `every` later
            for port in self.rest_ports:
                up = instance_ready(port, self.models, self.timeout)
                self._last[port] = (time.monotonic(), up)
            self._first.set()
            ever_up = ever_up or all(up for _, up in self._last.values())
            time.sleep(self.every if ever_up else min(self.every, STARTING_EVERY))
