"""The Python service process on its own (gunicorn, as serve starts it, no nginx and no model
server): what gunicorn accepts and how it refuses, the run's secret, its sockets' modes, and
workers forked while reports of nginx's requests pour in."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.service_process import ServiceProcess, service_process
from sagemaker_serving.python_service import TOKEN_HEADER


class Service:
    """A started ServiceProcess, its log lines, and raw HTTP over its unix socket."""

    def __init__(self, process: ServiceProcess) -> None:
        self.process = process
        self.lines: list[str] = []
        process.child.relay = self._relay

    def _relay(self, name: str, stream) -> None:
        for raw in stream:
            self.lines.append(raw.decode("utf-8", errors="replace"))

    @property
    def token(self) -> str:
        return self.process.token

    def log(self) -> str:
        return "".join(self.lines)

    @property
    def metrics_address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.process.metrics_port)

    def workers(self) -> set[int]:
        assert self.process.child.pid is not None
        return {p.pid for p in psutil.Process(self.process.child.pid).children()}

    def raw(self, data: bytes, timeout: float = 10) -> bytes:
        """Send `data`, read one response (headers + Content-Length body, or to close)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(self.process.socket_path)
            sock.sendall(data)
            reply = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return reply
                reply += chunk
                head, sep, body = reply.partition(b"\r\n\r\n")
                length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                if sep and length and len(body) >= int(length.group(1)):
                    return reply

    def get(self, target: str, headers: str = "", token: bool = True, timeout: float = 10):
        secret = f"{TOKEN_HEADER}: {self.token}\r\n" if token else ""
        request = f"GET {target} HTTP/1.1\r\nHost: x\r\n{secret}{headers}\r\n"
        return status_of(self.raw(request.encode("latin-1"), timeout))

    def datagram(self, secret: str, *lines: str) -> bytes:
        return "\n".join([secret, *lines]).encode()


def status_of(reply: bytes) -> tuple[int, bytes, bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


@pytest.fixture(scope="module", params=["uvicorn", "sync"])
def service(request, tmp_path_factory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("service_process")
    (root / "model").mkdir()  # no code/: the built-in formats service
    (root / "run").mkdir()
    settings = Settings.from_env(
        {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_WORKER_CLASS": request.param}
    )
    process = service_process(settings, root / "model", root / "run", "m", [(1, 2)], {})
    svc = Service(process)
    process.child.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if svc.get("/ping", timeout=2)[0] == 200:
                    break
            if time.monotonic() > deadline or not process.child.alive():
                pytest.fail(f"the service did not start:\n{svc.log()}")
            time.sleep(0.2)
        yield svc
    finally:
        process.child.stop(20)
        process.cleanup()


def test_gunicorn_takes_what_nginx_passes_on(service):
    # request lines up to nginx's 8 KB buffers, many headers, long header lines
    assert service.get("/ping?" + "a" * 8000)[0] == 200
    assert service.get("/ping", "".join(f"X-H{i}: v\r\n" for i in range(1000)))[0] == 200
    assert service.get("/ping", f"X-Long: {'v' * 8180}\r\n")[0] == 200


def test_requests_leave_no_access_lines_nginx_writes_those(service):
    marker = "/ping?no-access-line"
    assert service.get(marker)[0] == 200
    assert service.get("/ping", "Connection: close\r\n")[0] == 200  # after the first
    assert marker not in service.log()
    assert "uvicorn.access" not in service.log()


def test_without_the_runs_secret_every_request_is_403(service):
    for target in ("/ping", "/metrics", "/invocations"):
        status, _, body = service.get(target, token=False)
        assert status == 403 and "Forbidden" in orjson.loads(body)["error"]
    status, _, _ = service.get("/ping", f"{TOKEN_HEADER}: {service.token}x\r\n", token=False)
    assert status == 403


def test_the_secret_is_neither_in_argv_nor_in_the_environment(service):
    child = service.process.child
    assert service.token not in " ".join(child.argv)
    assert not any(service.token in value for value in (child.env or {}).values())
    assert service.token not in service.log()


def test_sockets_are_for_serves_user_only(service):
    """The whole stack runs as serve's user (nginx's workers too, as root)."""
    process = service.process
    folder = process.socket_dir.stat()
    sockets = [Path(process.socket_path).stat()]
    assert all(stat.S_ISSOCK(s.st_mode) for s in sockets)
    assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.geteuid()
    assert all(stat.S_IMODE(s.st_mode) == 0o600 for s in sockets)


def test_its_settings_come_from_its_config_file_only(service):
    """The command line names the config file and the inherited descriptors, nothing else."""
    config_path = service.process.child.argv[3]
    config = ServiceConfig.from_file(Path(config_path))
    command = psutil.Process(service.process.child.pid).cmdline()
    assert [arg.split("=")[0] for arg in command[3:]] == [
        config_path,
        "--front-metrics-fd",
        "--token-fd",
    ]
    assert config.socket_path == service.process.socket_path
    assert len(service.workers()) == config.workers


def test_the_metrics_port_listens_on_loopback_only(service):
    """The reports' socket is UDP on 127.0.0.1 (its secret keeps others' datagrams out)."""
    ours = [
        c
        for c in psutil.Process(service.process.child.pid).net_connections(kind="udp")
        if c.laddr.port == service.process.metrics_port
    ]
    assert [c.laddr.ip for c in ours] == ["127.0.0.1"]


def _count(service: Service, model: str) -> float:
    status, _, body = service.get("/metrics")
    assert status == 200, (body, service.log()[-3000:])
    pattern = rb'sagemaker_requests_total\{model="' + model.encode() + rb'",[^}]*\} (\S+)'
    return sum(float(v) for v in re.findall(pattern, body))


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_forged_reports_are_dropped_and_reported(service):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(service.datagram("/ping 200 forged-model 0.1"), service.metrics_address)
        sock.sendto(
            service.datagram("not-the-secret", "/ping 200 forged-model 0.1"),
            service.metrics_address,
        )
        sock.sendto(
            service.datagram(service.token, "/ping 200 real-model 0.1"),
            service.metrics_address,
        )
    assert _wait(lambda: _count(service, "real-model") == 1, 10)
    assert _wait(lambda: "without this run's secret" in service.log(), 10), service.log()
    assert _count(service, "forged-model") == 0


def test_new_workers_answer_while_reports_pour_in(service):
    """The gunicorn master forks each new worker; a thread of the master holding a lock at
    that moment would leave the worker waiting for it forever."""
    stop = threading.Event()
    sent = [0]
    message = service.datagram(service.token, "/ping 200 flood 0.001")

    def flood() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.5)
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    sock.sendto(message, service.metrics_address)
                    sent[0] += 1

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        # no thread in the master that could hold a lock when it forks (at the default
        # switch interval a master-side receiver rarely holds prometheus_client's lock at
        # a fork; with sys.setswitchinterval(1e-6) about 1 fork in 20 hung)
        assert _wait(lambda: sent[0] > 100, 10)
        master = psutil.Process(service.process.child.pid)
        assert master.num_threads() == 1, [t.id for t in master.threads()]
        for cycle in range(30):
            (worker,) = service.workers()
            os.kill(worker, signal.SIGKILL)
            new = _wait(lambda old=worker: bool(service.workers() - {old}), 10)
            assert new, f"cycle {cycle}: no new worker"
            try:
                status = service.get("/ping", timeout=10)[0]
            except TimeoutError:
                pytest.fail(f"cycle {cycle}: the new worker did not answer within 10 s")
            assert status == 200
    finally:
        stop.set()
        sender.join(5)
    assert sent[0] > 1000
    assert _wait(lambda: _count(service, "flood") > 0, 10)
    before = _count(service, "flood")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(5):
            sock.sendto(message, service.metrics_address)
    assert _wait(lambda: _count(service, "flood") >= before + 5, 10)
    assert "WORKER TIMEOUT" not in service.log()
