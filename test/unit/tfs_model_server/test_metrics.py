"""api.metrics: TF Serving's metric names and the Prometheus text it exports."""

from __future__ import annotations

import time

from tfs_model_server.metrics import Counter, Histogram, ServingMetrics


def test_counter_text() -> None:
    counter = Counter("/tensorflow/serving/request_count", ["model_name", "status"])
    counter.inc("m", "OK")
    counter.inc("m", "OK", amount=2)
    counter.inc('we"ird\n', "NOT_FOUND")
    assert counter.value("m", "OK") == 3
    assert counter.render() == [
        "# TYPE :tensorflow:serving:request_count counter",
        ':tensorflow:serving:request_count{model_name="m",status="OK"} 3',
        ':tensorflow:serving:request_count{model_name="we\\"ird\\n",status="NOT_FOUND"} 1',
    ]


def test_histogram_text() -> None:
    histogram = Histogram("/a/latency", ["model"], [10, 100])
    for value in (5, 50, 500, 10):
        histogram.observe(value, "m")
    assert histogram.count("m") == 4
    assert histogram.render() == [
        "# TYPE :a:latency histogram",
        ':a:latency_bucket{model="m",le="10"} 1',  # a limit is exclusive, as in TF Serving
        ':a:latency_bucket{model="m",le="100"} 3',
        ':a:latency_bucket{model="m",le="+Inf"} 4',
        ':a:latency_sum{model="m"} 565',
        ':a:latency_count{model="m"} 4',
    ]


def test_only_inference_requests_are_counted() -> None:
    metrics = ServingMetrics()
    metrics.record_request("m", "predict", "OK")
    metrics.record_request("m", "get_model_status", "OK")
    metrics.record_success("m", "classify", "GRPC", time.perf_counter())
    assert metrics.request_count.value("m", "OK") == 2
    assert metrics.request_latency.count("m", "classify", "GRPC") == 1
    text = metrics.render().decode()
    assert text.endswith("\n") and "# TYPE :tensorflow:serving:batching_session:batch_size" in text


def test_forget_drops_a_models_series_and_requests_count_only_known_models() -> None:
    known = {"m", "other"}
    metrics = ServingMetrics(model_known=known.__contains__)
    for name in ("m", "other", "unknown"):
        metrics.record_success(name, "predict", "REST", time.perf_counter())
        metrics.example_count_total.inc(name, amount=2)
    metrics.load_attempt_count.inc("/models/m/1", "success")
    metrics.warmup_records_read.inc("/models/m/1", "OK", amount=3)
    metrics.load_attempt_count.inc("/models/other/1", "success")
    page = metrics.render().decode()
    assert 'model_name="m"' in page and 'model_name="unknown"' not in page
    metrics.forget("m", ["/models/m/1"], model_gone=False)  # the version went, the model stays
    page = metrics.render().decode()
    assert "/models/m/1" not in page and 'model_name="m"' in page
    metrics.forget("m", [], model_gone=True)
    page = metrics.render().decode()
    assert '"m"' not in page
    assert 'model_name="other"' in page and "/models/other/1" in page
