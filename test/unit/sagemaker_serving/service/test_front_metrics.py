"""Reports of what nginx answered (the run's secret, parsing) and bounded label values."""

from __future__ import annotations

import logging
import socket
import time
from urllib.parse import quote

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector

from sagemaker_serving.multimodel.manager import MAX_NAME_LENGTH
from sagemaker_serving.service import front_metrics
from sagemaker_serving.service import metrics as service_metrics
from sagemaker_serving.service.front_metrics import (
    FrontMetricsReceiver,
    FrontRequest,
    parse_request,
)
from sagemaker_serving.service.metrics import (
    MAX_LABEL_CHARS,
    MAX_MODEL_LABELS,
    OTHER_MODELS,
    ServiceMetrics,
    WrittenFilesCollector,
    label_text,
)

TOKEN = "run-secret"


@pytest.fixture(autouse=True)
def single_process(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)


def datagram(secret: str, *lines: str) -> bytes:
    return "\n".join([secret, *lines]).encode()


def receiver() -> FrontMetricsReceiver:
    return FrontMetricsReceiver(None, ServiceMetrics(), TOKEN)  # type: ignore[arg-type]


def text(metrics: ServiceMetrics) -> str:
    metrics.flush()
    return generate_latest(metrics.registry).decode()


def test_every_line_of_a_report_is_counted():
    r = receiver()
    r.handle(datagram(TOKEN, "/invocations 200 half_plus_two 0.004", "/ping 200 - 0.001"))
    r.handle(datagram(TOKEN, "/invocations 200 half_plus_two 0.002", "not a request line"))
    expected = (
        'sagemaker_requests_total{model="half_plus_two",route="/invocations",status="200"} 2.0'
    )
    assert expected in text(r.metrics)
    assert 'sagemaker_requests_total{model="",route="/ping",status="200"} 1.0' in text(r.metrics)


def test_reports_hold_whole_lines_within_the_datagram_limit():
    lines = [f"/invocations 200 model-{i} 0.001".encode() for i in range(5000)]
    sent = front_metrics.reports(TOKEN, [*lines, b"x" * (front_metrics.MAX_LINE + 100)])
    assert len(sent) > 1
    assert all(len(d) <= front_metrics.REPORT_BYTES for d in sent)
    received = []
    for d in sent:
        secret, got = front_metrics.split_report(d)
        assert secret == TOKEN.encode()
        received += got
    assert received == [*lines, b"x" * front_metrics.MAX_LINE]
    assert front_metrics.reports(TOKEN, []) == []


@pytest.mark.parametrize(
    "message",
    [
        datagram("/invocations 200 m 0.1"),  # no secret
        datagram("wrong", "/invocations 200 m 0.1"),
        datagram(f"{TOKEN}x", "/invocations 200 m 0.1"),
        datagram(f"{TOKEN} /invocations 200 m 0.1"),  # the secret on the line
        f"<190>Nov 23 10:00:00 tfs_metrics: {TOKEN} /ping 200 m 0.1".encode(),  # syslog
        b"",
    ],
)
def test_reports_without_the_runs_secret_are_dropped(message):
    r = receiver()
    r.handle(message)
    assert "sagemaker_requests_total{" not in text(r.metrics)


def test_forged_reports_are_reported_at_most_once_a_minute(caplog, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(front_metrics.time, "monotonic", lambda: now[0])
    r = receiver()
    with caplog.at_level(logging.WARNING, logger="sagemaker_serving.service.front_metrics"):
        for _ in range(50):
            r.handle(datagram("forged", "/ping 200 - 0.1"))
        assert len(caplog.records) == 1
        now[0] += 30
        r.handle(datagram("forged", "/ping 200 - 0.1"))
        assert len(caplog.records) == 1
        now[0] += 31
        r.handle(datagram("forged", "/ping 200 - 0.1"))
    assert len(caplog.records) == 2
    assert "dropped 51 metrics report" in caplog.records[1].getMessage()


def test_a_request_naming_the_longest_multi_model_name_is_counted():
    """A name of 1024 characters, percent-encoded by tfs.js (12 KB in UTF-8's 3-byte
    characters), makes a whole line of a report."""
    name = "\u20ac" * MAX_NAME_LENGTH
    line = f"/invocations 200 {quote(name, safe='')} 0.01".encode()
    r = receiver()
    for report in front_metrics.reports(TOKEN, [line]):
        r.handle(report)
    assert f'model="{label_text(name)}",route="/invocations",status="200"}} 1.0' in text(r.metrics)


def test_parse_checks_every_field():
    assert parse_request(b"/ping 200 - 0.001") == FrontRequest("/ping", 200, "", 0.001)
    assert parse_request(b"/invocations 404 a b c 0.5") == FrontRequest(
        "/invocations", 404, "a b c", 0.5
    )
    assert parse_request(b"/anything 200 m 0.1").route == "other"  # type: ignore[union-attr]
    # tfs.js's requestModel percent-encodes the name a request gives (opaque on multi-model)
    assert parse_request(b"/models 409 %C3%BCber%20model%2Fx 0.2") == FrontRequest(
        "/models", 409, "\u00fcber model/x", 0.2
    )
    for bad in (b"/ping 200 0.1", b"/ping x m 0.1", b"/ping 999 m 0.1", b"/ping 200 m nan"):
        assert parse_request(bad) is None


def test_model_labels_are_capped_per_process():
    metrics = ServiceMetrics()
    for i in range(MAX_MODEL_LABELS + 50):
        metrics.request("/invocations", 200, f"model-{i}", 0.01)
    metrics.request("/invocations", 200, "model-0", 0.01)  # one it already had: kept
    lines = [line for line in text(metrics).splitlines() if line.startswith("sagemaker_requests_")]
    models = {line.split('model="')[1].split('"')[0] for line in lines}
    assert len(models) == MAX_MODEL_LABELS + 1
    assert OTHER_MODELS in models
    assert 'sagemaker_requests_total{model="model-0",route="/invocations",status="200"} 2.0' in (
        text(metrics)
    )
    assert (
        f'sagemaker_requests_total{{model="{OTHER_MODELS}",route="/invocations",status="200"}} 50.0'
        in text(metrics)
    )


def test_long_and_unprintable_label_values_are_bounded_and_distinct():
    a, b = "x" * 1024, "x" * 1023 + "y"
    label_a, label_b = service_metrics.label_text(a), service_metrics.label_text(b)
    assert len(label_a) <= MAX_LABEL_CHARS and len(label_b) <= MAX_LABEL_CHARS
    assert label_a != label_b
    assert service_metrics.label_text("a\nb\x00c") == "a?b?c"
    assert service_metrics.label_text("short") == "short"


def test_metrics_skip_a_workers_file_that_is_still_being_created(tmp_path):
    """A worker creates its value file empty, then sizes it: /metrics read in between."""
    written = MmapedDict(str(tmp_path / "counter_1.db"))
    key = mmap_key("sagemaker_requests", "sagemaker_requests_total", ["route"], ["/ping"], "h")
    written.write_value(key, 3.0, 0.0)
    written.close()
    (tmp_path / "counter_2.db").touch()  # the other worker, between open() and truncate()

    with pytest.raises(Exception, match="unpack_from"):
        generate_latest(_registry_with(MultiProcessCollector, tmp_path))
    text = generate_latest(_registry_with(WrittenFilesCollector, tmp_path)).decode()
    assert 'sagemaker_requests_total{route="/ping"} 3.0' in text


def _registry_with(collector, path):
    registry = CollectorRegistry()
    collector(registry, path=str(path))
    return registry


def test_reports_wait_in_the_socket_while_nobody_reads():
    """What serve relays while every receiver is busy (or the service restarts) stays
    queued: a second of a busy fast path's reports, none read meanwhile, all received (a
    unix datagram socket would have refused the 11th: net.unix.max_dgram_qlen)."""
    sock = front_metrics.bind_socket()
    address = sock.getsockname()
    line = b"/invocations 200 m 0.001"
    sent = front_metrics.reports(TOKEN, [line] * 6000)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for report in sent:
                sender.sendto(report, address)
        sock.settimeout(5)
        received = [sock.recv(front_metrics.REPORT_BYTES) for _ in sent]
    finally:
        sock.close()
    assert received == sent


def test_a_running_receiver_counts_what_arrives():
    sock = front_metrics.bind_socket()
    address = sock.getsockname()
    r = FrontMetricsReceiver(sock, ServiceMetrics(), TOKEN).start()
    expected = 'sagemaker_requests_total{model="m",route="/invocations",status="200"} 3000.0'
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for report in front_metrics.reports(TOKEN, [b"/invocations 200 m 0.001"] * 3000):
                sender.sendto(report, address)
        deadline = time.monotonic() + 10
        while expected not in text(r.metrics) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        r.close()
    assert expected in text(r.metrics)
