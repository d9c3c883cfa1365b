"""The service's Prometheus metrics: bounded labels, stages, records, rendering."""

from __future__ import annotations

from sagemaker_serving.service.metrics import (
    MAX_LABEL_CHARS,
    MAX_MODEL_LABELS,
    OTHER_MODELS,
    ServiceMetrics,
    label_text,
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
