"""Prometheus metrics of the Python service (shared across gunicorn workers when
PROMETHEUS_MULTIPROC_DIR is set, which serve does).

Per-request bookkeeping stays off the request path: a request appends its figures to a queue
(one atomic append), and a thread of the worker moves them into the Prometheus values every
FLUSH_SECONDS, as does /metrics before it answers. Another worker's latest figures show up
in /metrics within FLUSH_SECONDS.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import functools
import glob
import hashlib
import math
import os
import threading
import time
from types import TracebackType
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
RECORD_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
REQUEST_LABELS = ("route", "status", "model")
REQUESTS_HELP = "Requests answered, counted by nginx when it sends the answer"
LATENCY_HELP = "Time from the request to its answer, per request (nginx's request time)"
STAGES_HELP = "Time per stage: input_handler, model_server, output_handler (or handler)"
RECORDS_HELP = "Records (instances, lines, rows, TFRecords) per request with a built-in format"


MAX_MODEL_LABELS = 100  # distinct model label values per process; then OTHER_MODELS
MAX_LABEL_CHARS = 100
OTHER_MODELS = "(other)"
FLUSH_SECONDS = 0.5
_REQUEST, _STAGE, _RECORDS = "request", "stage", "records"  # kinds of queued figures


def label_text(value: str) -> str:
    """A label value of bounded length: printable, a long one cut with a hash of the rest
    (names are opaque strings of up to 1024 characters on multi-model endpoints)."""
    shown = "".join(c if c.isprintable() else "?" for c in value[:MAX_LABEL_CHARS])
    if len(value) <= MAX_LABEL_CHARS:
        return shown
    digest = hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{shown[: MAX_LABEL_CHARS - 14]}..{digest}"


class WrittenFilesCollector(multiprocess.MultiProcessCollector):
    """prometheus_client's multiprocess collector without the files still being created.

    A process creates its `<type>_<pid>.db` file empty and then sizes it; a reader that
    opens it in between fails (`unpack_from requires a buffer of at least 4 bytes`). A file
    only grows, so skipping the empty ones is race-free: they hold no values yet.
    """

    def collect(self):
        files = []
        for path in glob.glob(os.path.join(self._path, "*.db")):
            with contextlib.suppress(FileNotFoundError):  # a dead worker's, being removed
                if os.path.getsize(path) > 0:
                    files.append(path)
        return self.merge(files, accumulate=True)


class ServiceMetrics:
    """Request counts by route/status/model, latency per stage, records per request.

    The model label takes at most MAX_MODEL_LABELS values per process (names past that
    count as OTHER_MODELS), so clients choosing names cannot grow /metrics without bound.
    """

    def __init__(self) -> None:
        self._models: set[str] = set()  # the model labels given so far
        registry = self.registry = CollectorRegistry()
        timing = functools.partial(Histogram, buckets=LATENCY_BUCKETS, registry=registry)
        self.requests = Counter(
            "sagemaker_requests", REQUESTS_HELP, REQUEST_LABELS, registry=registry
        )
        self.latency = timing("sagemaker_request_duration_seconds", LATENCY_HELP, ["route"])
        self.stages = timing("sagemaker_stage_duration_seconds", STAGES_HELP, ["stage"])
        self.records_per_request = Histogram(
            "sagemaker_request_records", RECORDS_HELP, buckets=RECORD_BUCKETS, registry=registry
        )
        self._histograms = {
            _REQUEST: self.latency,
            _STAGE: self.stages,
            _RECORDS: self.records_per_request,
        }
        self._pending: collections.deque[tuple[str, Any, float]] = collections.deque()
        self._flush_lock = threading.Lock()
        threading.Thread(target=self._flush_forever, name="metrics-flush", daemon=True).start()

    def model_label(self, model: str) -> str:
        """The model's label: its label_text while fewer than MAX_MODEL_LABELS were given,
        else OTHER_MODELS (called by flush alone, under its lock)."""
        label = label_text(model)
        if label in self._models:
            return label
        if len(self._models) >= MAX_MODEL_LABELS:
            return OTHER_MODELS
        self._models.add(label)
        return label

    def request(self, route: str, status: int, model: str, seconds: float) -> None:
        self._pending.append((_REQUEST, (route, status, model), seconds))

    def stage(self, name: str) -> Stage:
        """A context manager timing one stage of a request (`with metrics.stage(...):`)."""
        return Stage(self, name)

    def stage_took(self, name: str, seconds: float) -> None:
        self._pending.append((_STAGE, name, seconds))

    def records(self, count: int | None) -> None:
        if count:
            self._pending.append((_RECORDS, None, count))

    def flush(self) -> None:
        """Move every queued figure into the Prometheus values (in this process), added up
        first: one update per label set, not one per request."""
        with self._flush_lock:
            batch = [self._pending.popleft() for _ in range(len(self._pending))]
            if not batch:
                return
            counts: collections.Counter[tuple[str, int, str]] = collections.Counter()
            observed: dict[tuple[str, str | None], list[float]] = collections.defaultdict(list)
            for kind, key, value in batch:
                if kind == _REQUEST:
                    counts[key] += 1
                    observed[_REQUEST, key[0]].append(value)
                else:
                    observed[kind, key].append(value)
            for (route, status, model), count in counts.items():  # a label per model, not request
                self.requests.labels(route, str(status), self.model_label(model)).inc(count)
            for (kind, key), values in observed.items():
                histogram = self._histograms[kind]
                observe_all(histogram if key is None else histogram.labels(key), values)

    def _flush_forever(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            self.flush()

    def render(self) -> bytes:
        """Prometheus text: all workers' values in multiprocess mode, else this process's."""
        self.flush()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            WrittenFilesCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)


def observe_all(histogram: Histogram, values: list[float]) -> None:
    """`histogram.observe(v)` for every v, as one update of its sum and of each bucket hit
    (what observe does, in prometheus_client 0.26's own attributes; a test compares the two)."""
    bounds = histogram._upper_bounds
    # NaN (not equal to itself) is in no bucket, as observe has it
    hits = collections.Counter(bisect.bisect_left(bounds, v) for v in values if v == v)
    histogram._sum.inc(math.fsum(values))
    for index, count in hits.items():
        histogram._buckets[index].inc(count)


class Stage:
    """Times the block it guards as one stage (a class: cheaper than a generator manager)."""

    __slots__ = ("metrics", "name", "started")

    def __init__(self, metrics: ServiceMetrics, name: str) -> None:
        self.metrics, self.name = metrics, name
        self.started = 0.0

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(
        self, kind: type | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.metrics.stage_took(self.name, time.monotonic() - self.started)


class MetricsPage:
    """GET /metrics: every process's values (it reads their files: on a thread)."""

    def __init__(self, metrics: ServiceMetrics, placement: Any) -> None:
        self.metrics = metrics
        self.placement = placement

    async def on_get(self, req: Any, resp: Any) -> None:
        resp.content_type = "text/plain; version=0.0.4; charset=utf-8"
        resp.data = await self.placement.thread(self.metrics.render)

    on_head = on_get
