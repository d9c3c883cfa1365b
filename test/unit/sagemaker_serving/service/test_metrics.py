"""The service's Prometheus metrics: bounded labels, stages, records, rendering."""

from __future__ import annotations

import math
import time

import pytest
from prometheus_client import CollectorRegistry, Histogram

from sagemaker_serving.service.metrics import (
    FLUSH_SECONDS,
    MAX_LABEL_CHARS,
    MAX_MODEL_LABELS,
    OTHER_MODELS,
    ServiceMetrics,
    label_text,
    observe_all,
)


def test_label_text_is_printable_and_bounded():
    assert label_text("model-1") == "model-1"
    assert label_text("a\nb") == "a?b"
    long = label_text("x" * 5000)
    assert len(long) == MAX_LABEL_CHARS and long != label_text("x" * 4999)


def test_model_labels_are_bounded_per_process():
    metrics = ServiceMetrics()
    labels = [metrics.model_label(f"m{i}") for i in range(MAX_MODEL_LABELS + 5)]
    assert labels[:MAX_MODEL_LABELS] == [f"m{i}" for i in range(MAX_MODEL_LABELS)]
    assert set(labels[MAX_MODEL_LABELS:]) == {OTHER_MODELS}
    assert metrics.model_label("m0") == "m0"


def test_requests_stages_and_records_are_rendered(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics = ServiceMetrics()
    metrics.request("/invocations", 200, "m", 0.01)
    with metrics.stage("handler"):
        pass
    metrics.records(3)
    metrics.records(None)
    text = metrics.render().decode()
    assert 'sagemaker_requests_total{model="m",route="/invocations",status="200"} 1.0' in text
    assert 'sagemaker_stage_duration_seconds_count{stage="handler"} 1.0' in text
    assert "sagemaker_request_records_count 1.0" in text
    assert 'sagemaker_request_duration_seconds_count{route="/invocations"} 1.0' in text


def samples(registry: CollectorRegistry) -> dict[tuple, float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_observe_all_is_observe_for_every_value():
    """The batched update and prometheus_client's own observe leave the same histogram
    (bounds, just past them, zero, negative, huge, infinite, NaN)."""
    values = [0.0, -1.0, 0.001, 0.005, 0.0051, 0.3, 1e9, math.inf, math.nan, 0.3, 2.5, 10.0]
    one, batched = CollectorRegistry(), CollectorRegistry()
    buckets = (0.001, 0.005, 0.1, 2.5, 10.0)
    single = Histogram("h", "h", ["r"], buckets=buckets, registry=one)
    together = Histogram("h", "h", ["r"], buckets=buckets, registry=batched)
    for value in values:
        single.labels("a").observe(value)
    observe_all(together.labels("a"), values)
    expected, got = samples(one), samples(batched)
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, nan_ok=True), key


def test_figures_queue_until_a_flush_and_add_up(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics = ServiceMetrics()
    for _ in range(5):
        metrics.request("/invocations", 200, "m", 0.002)
    metrics.request("/invocations", 400, "m", 0.002)
    key = (
        "sagemaker_requests_total",
        (("model", "m"), ("route", "/invocations"), ("status", "200")),
    )
    assert samples(metrics.registry).get(key) is None  # queued, not yet counted
    metrics.flush()
    assert samples(metrics.registry)[key] == 5.0
    count = ("sagemaker_request_duration_seconds_count", (("route", "/invocations"),))
    assert samples(metrics.registry)[count] == 6.0


def test_the_flusher_thread_moves_figures_without_a_render(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics = ServiceMetrics()
    metrics.records(7)
    key = ("sagemaker_request_records_count", ())
    deadline = time.monotonic() + 10 * FLUSH_SECONDS
    while samples(metrics.registry).get(key) != 1.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert samples(metrics.registry).get(key) == 1.0
