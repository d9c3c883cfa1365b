"""TF Serving's Prometheus metrics, with its names and text layout.

TF Serving exports counters without the `_total` suffix that prometheus_client adds, so the
few metrics it defines are kept here and rendered in the Prometheus text format directly.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence


def _exponential(scale: float, growth: float, count: int) -> list[float]:
    return [scale * growth**i for i in range(count)]


# monitoring::Buckets::Exponential(10, 1.8, 33): microseconds, up to ~20 minutes.
LATENCY_BUCKETS = _exponential(10, 1.8, 33)
# request_example_counts: Exponential(1, 2, 15).
EXAMPLE_COUNT_BUCKETS = _exponential(1, 2, 15)


def _leading_digit(name: str) -> str:
    return "_" + name if name[:1].isdigit() else name


def _mangle(name: str) -> str:
    """GetPrometheusMetricName: [^a-zA-Z0-9_] becomes ':'."""
    return _leading_digit(re.sub("[^a-zA-Z0-9_]", ":", name))


def _label_name(name: str) -> str:
    """SanatizeLabelName: [^a-zA-Z0-9] becomes '_'."""
    return _leading_digit(re.sub("[^a-zA-Z0-9]", "_", name))


def _escape(value: str) -> str:
    # TF escapes only \ and "; a newline is escaped too, to keep the page parseable.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    """{name="value",...}: braces even without labels, as TF prints them."""
    parts = [f'{_label_name(n)}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}"


def _double(value: float) -> str:
    """absl::StrCat of a double: six significant digits, like %g."""
    return f"{value:.6g}"


class Counter:
    def __init__(self, name: str, labels: Sequence[str]) -> None:
        self.path, self.name, self.label_names = name, _mangle(name), tuple(labels)
        self._values: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, amount: int = 1) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0) + amount

    def value(self, *labels: str) -> int:
        return self._values.get(labels, 0)

    def remove(self, first_labels: Collection[str]) -> None:
        """Drop the series whose first label value is one of `first_labels`."""
        with self._lock:
            for key in [key for key in self._values if key and key[0] in first_labels]:
                del self._values[key]

    def first_value(self) -> int:
        """The value of the first label set in order (TSL's first point), 0 without one."""
        with self._lock:
            return self._values[min(self._values)] if self._values else 0

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        lines = [f"# TYPE {self.name} counter"]
        lines += [f"{self.name}{_labels(self.label_names, k)} {v}" for k, v in items]
        return lines


class Histogram:
    def __init__(self, name: str, labels: Sequence[str], buckets: Sequence[float]) -> None:
        self.path, self.name, self.label_names = name, _mangle(name), tuple(labels)
        self.buckets = list(buckets)
        self._values: dict[tuple[str, ...], list[float]] = {}  # counts per bucket + [sum, count]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        index = bisect.bisect_right(self.buckets, value)  # a bucket's limit is exclusive
        with self._lock:
            row = self._values.get(labels)
            if row is None:
                row = self._values[labels] = [0.0] * (len(self.buckets) + 3)
            row[index] += 1
            row[-2] += value
            row[-1] += 1

    def remove(self, first_labels: Collection[str]) -> None:
        """Drop the series whose first label value is one of `first_labels`."""
        with self._lock:
            for key in [key for key in self._values if key and key[0] in first_labels]:
                del self._values[key]

    def count(self, *labels: str) -> int:
        row = self._values.get(labels)
        return int(row[-1]) if row else 0

    def render(self) -> list[str]:
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._values.items())
        lines = [f"# TYPE {self.name} histogram"]
        for key, row in items:
            cumulative = 0.0
            for limit, n in zip([*self.buckets, float("inf")], row[:-2], strict=True):
                cumulative += n
                le = "+Inf" if limit == float("inf") else _double(limit)
                bucket_labels = _labels(self.label_names, key, 'le="' + le + '"')
                lines.append(f"{self.name}_bucket{bucket_labels} {int(cumulative)}")
            lines.append(f"{self.name}_sum{_labels(self.label_names, key)} {_double(row[-2])}")
            lines.append(f"{self.name}_count{_labels(self.label_names, key)} {int(row[-1])}")
        return lines


INFERENCE_APIS = frozenset({"predict", "classify", "regress", "multi_inference"})


class ServingMetrics:
    """The metrics one model server process exports.

    Requests are counted only for models in the config (`model_known`; as in TF Serving,
    which counts a request once it has the model), and a model's series go when it is
    unloaded (`forget`): a stream of distinct model names does not grow the page.
    """

    def __init__(self, model_known: Callable[[str], bool] | None = None) -> None:
        self.model_known = model_known
        self.request_count = Counter("/tensorflow/serving/request_count", ["model_name", "status"])
        self.request_latency = Histogram(
            "/tensorflow/serving/request_latency",
            ["model_name", "API", "entrypoint"],
            LATENCY_BUCKETS,
        )
        self.runtime_latency = Histogram(
            "/tensorflow/serving/runtime_latency", ["model_name", "API", "runtime"], LATENCY_BUCKETS
        )
        self.example_counts = Histogram(
            "/tensorflow/serving/request_example_counts", ["model"], EXAMPLE_COUNT_BUCKETS
        )
        self.example_count_total = Counter(
            "/tensorflow/serving/request_example_count_total", ["model"]
        )
        self.load_attempt_count = Counter(
            "/tensorflow/cc/saved_model/load_attempt_count", ["model_path", "status"]
        )
        self.load_latency = Counter("/tensorflow/cc/saved_model/load_latency", ["model_path"])
        self.warmup_latency = Histogram(
            "/tensorflow/serving/model_warmup_latency", ["model_path", "status"], LATENCY_BUCKETS
        )
        self.warmup_records_read = Counter(
            "/tensorflow/serving/model_warmup_records_read", ["model_path", "status"]
        )
        self.queuing_latency = Histogram(
            "/tensorflow/serving/batching_session/queuing_latency",
            ["thread_pool_name"],
            LATENCY_BUCKETS,
        )
        self.batch_size = Histogram(
            "/tensorflow/serving/batching_session/batch_size",
            ["thread_pool_name"],
            EXAMPLE_COUNT_BUCKETS,
        )
        self._all: list[Counter | Histogram] = [
            self.request_count,
            self.request_latency,
            self.runtime_latency,
            self.example_counts,
            self.example_count_total,
            self.load_attempt_count,
            self.load_latency,
            self.warmup_latency,
            self.warmup_records_read,
            self.queuing_latency,
            self.batch_size,
        ]

    def record_request(self, model_name: str, api: str, status: str) -> None:
        """Count an inference request (status and metadata calls are not counted)."""
        if api in INFERENCE_APIS and self._known(model_name):
            self.request_count.inc(model_name, status)

    def record_success(self, model_name: str, api: str, protocol: str, started: float) -> None:
        """Count a request that succeeded and its latency since time.perf_counter() `started`."""
        self.record_request(model_name, api, "OK")
        if self._known(model_name):
            self.request_latency.observe(
                (time.perf_counter() - started) * 1e6, model_name, api, protocol
            )

    def _known(self, model_name: str) -> bool:
        return self.model_known is None or self.model_known(model_name)

    def forget(self, model_name: str, paths: Sequence[str], model_gone: bool) -> None:
        """Drop the series of unloaded versions (by their paths) and, when the model left the
        config, those of the model itself (by its name)."""
        for metric in self._all:
            first = metric.label_names[:1]
            if first == ("model_path",):
                metric.remove(set(paths))
            elif model_gone and first in (("model_name",), ("model",)):
                metric.remove({model_name})

    def int64_values(self, names: Sequence[str]) -> dict[str, int]:
        """Each named metric's int64 value as ModelService's ReloadConfig reads it: a
        counter's first point; 0 for a histogram or a name no metric has."""
        counters = {m.path: m for m in self._all if isinstance(m, Counter)}
        return {name: counters[name].first_value() if name in counters else 0 for name in names}

    def render(self) -> bytes:
        """The page, metrics in the order of their names (TF's CollectionRegistry map)."""
        lines: list[str] = []
        for metric in sorted(self._all, key=lambda m: m.path):
            lines += metric.render()
        return ("\n".join(lines) + "\n").encode()
