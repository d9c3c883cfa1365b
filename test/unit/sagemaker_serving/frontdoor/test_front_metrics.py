"""nginx's metrics datagrams (the run's secret, parsing) and bounded label values."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector

from sagemaker_serving.frontdoor import front_metrics
from sagemaker_serving.frontdoor.front_metrics import (
    FrontMetricsReceiver,
    FrontRequest,
    parse_request,
)
from sagemaker_serving.service import metrics as service_metrics
from sagemaker_serving.service.metrics import (
    MAX_LABEL_CHARS,
    MAX_MODEL_LABELS,
    OTHER_MODELS,
    ServiceMetrics,
    WrittenFilesCollector,
)

TOKEN = "run-secret"


@pytest.fixture(autouse=True)
def single_process(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)


def datagram(message: str) -> bytes:
    return f"<190>Nov 23 10:00:00 tfs_metrics: {message}".encode()


def receiver() -> FrontMetricsReceiver:
    return FrontMetricsReceiver(None, ServiceMetrics(), TOKEN)  # type: ignore[arg-type]


def text(metrics: ServiceMetrics) -> str:
    metrics.flush()
    return generate_latest(metrics.registry).decode()


def test_a_datagram_from_our_nginx_is_counted():
    r = receiver()
    r.handle(datagram(f"{TOKEN} /invocations 200 half_plus_two 0.004"))
    expected = (
        'sagemaker_requests_total{model="half_plus_two",route="/invocations",status="200"} 1.0'
    )
    assert expected in text(r.metrics)


@pytest.mark.parametrize(
    "message",
    [
        "/invocations 200 m 0.1",  # the format before the secret
        "wrong /invocations 200 m 0.1",
        f"{TOKEN}x /invocations 200 m 0.1",
        "",
    ],
)
def test_datagrams_without_the_runs_secret_are_dropped(message):
    r = receiver()
    r.handle(datagram(message))
    r.handle(b"no tag at all")
    assert "sagemaker_requests_total{" not in text(r.metrics)


def test_forged_datagrams_are_reported_at_most_once_a_minute(caplog, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(front_metrics.time, "monotonic", lambda: now[0])
    r = receiver()
    with caplog.at_level(logging.WARNING, logger="sagemaker_serving.frontdoor.front_metrics"):
        for _ in range(50):
            r.handle(datagram("forged /ping 200 - 0.1"))
        assert len(caplog.records) == 1
        now[0] += 30
        r.handle(datagram("forged /ping 200 - 0.1"))
        assert len(caplog.records) == 1
        now[0] += 31
        r.handle(datagram("forged /ping 200 - 0.1"))
    assert len(caplog.records) == 2
    assert "dropped 51 metrics datagram" in caplog.records[1].getMessage()


def test_parse_checks_every_field():
    assert parse_request(b"/ping 200 - 0.001") == FrontRequest("/ping", 200, "", 0.001)
    assert parse_request(b"/invocations 404 a b c 0.5") == FrontRequest(
        "/invocations", 404, "a b c", 0.5
    )
    assert parse_request(b"/anything 200 m 0.1").route == "other"  # type: ignore[union-attr]
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


def test_a_burst_waits_in_the_socket_while_nobody_reads():
    """What nginx sends while every receiver is busy stays queued: 100 datagrams sent
    without blocking, none read meanwhile, all received (a unix datagram socket would have
    refused the 11th: net.unix.max_dgram_qlen, nginx drops what it cannot send)."""
    sock = front_metrics.bind_socket()
    address = sock.getsockname()
    line = datagram(f"{TOKEN} /invocations 200 m 0.001")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for _ in range(100):
                sender.sendto(line, address)
        sock.settimeout(5)
        received = [sock.recv(4096) for _ in range(100)]
    finally:
        sock.close()
    assert received == [line] * 100


def test_nginx_sends_to_the_loopback_port():
    directive = front_metrics.nginx_access_log(4242)
    assert "access_log syslog:server=127.0.0.1:4242,nohostname,tag=tfs_metrics " in directive
    assert directive.rstrip().endswith("sagemaker_metrics if=$metrics_from_nginx;")


@pytest.mark.parametrize(
    ("receive_buffer", "pause"),
    [
        (212992, 0.005),  # net.core.rmem_max 106496: 208 datagrams, never under 5 ms
        (425984, 416 / 80_000),  # Linux's default 212992, doubled: 416 datagrams
        (1 << 20, 1024 / 80_000),
        (8 << 20, 0.02),  # a large buffer: 20 ms at most
    ],
)
def test_the_pause_leaves_room_in_the_granted_buffer(receive_buffer, pause):
    assert front_metrics.pause_seconds(receive_buffer) == pytest.approx(pause)


def test_the_receiver_pauses_for_its_own_socket():
    sock = front_metrics.bind_socket()
    try:
        granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        r = FrontMetricsReceiver(sock, ServiceMetrics(), TOKEN).start()
        assert r.pause == front_metrics.pause_seconds(granted)
    finally:
        sock.close()


def test_the_receiver_counts_bursts_whole_with_one_wake_up_per_batch():
    """A running receiver waits for datagrams once per batch (what is queued then is read
    without waiting), not once per datagram, and counts every datagram of bursts larger than
    a batch (MAX_BATCH)."""

    class CountedSocket:
        def __init__(self, sock: socket.socket) -> None:
            self.sock, self.waits = sock, 0

        def recv(self, size: int, flags: int = 0) -> bytes:
            self.waits += not flags & socket.MSG_DONTWAIT
            return self.sock.recv(size, flags)

        def getsockopt(self, level: int, option: int) -> int:
            return self.sock.getsockopt(level, option)

        def close(self) -> None:
            self.sock.close()

    sock = CountedSocket(front_metrics.bind_socket())
    address = sock.sock.getsockname()
    r = FrontMetricsReceiver(sock, ServiceMetrics(), TOKEN).start()  # type: ignore[arg-type]
    bursts, size = 2, 300
    expected = (
        'sagemaker_requests_total{model="m",route="/invocations",status="200"} '
        f"{float(bursts * size)}"
    )
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for _ in range(bursts):
                for _ in range(size):
                    sender.sendto(datagram(f"{TOKEN} /invocations 200 m 0.001"), address)
                time.sleep(0.05)
        deadline = time.monotonic() + 10
        while expected not in text(r.metrics) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        r.close()
    assert expected in text(r.metrics)
    assert sock.waits < bursts * size / 10
