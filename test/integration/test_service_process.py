"""The Python service process on its own (gunicorn, as serve starts it, no nginx and no model
server): what gunicorn accepts, its socket's modes, its settings' one source, and workers
forked while requests pour in."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
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


class Service:
    """A started ServiceProcess, its log lines, and raw HTTP over its unix socket."""

    def __init__(self, process: ServiceProcess) -> None:
        self.process = process
        self.lines: list[str] = []
        process.child.relay = self._relay

    def _relay(self, name: str, stream) -> None:
        while chunk := stream.read1(65536):  # the supervisor's relay reads so too
            self.lines.append(chunk.decode("utf-8", errors="replace"))

    def log(self) -> str:
        return "".join(self.lines)

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

    def get(self, target: str, headers: str = "", timeout: float = 10):
        request = f"GET {target} HTTP/1.1\r\nHost: x\r\n{headers}\r\n"
        return status_of(self.raw(request.encode("latin-1"), timeout))


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
    process = service_process(settings, root / "model", root / "run", ["m"], "m", [(1, 2)], {})
    svc = Service(process)
    process.child.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if svc.get("/metrics", timeout=2)[0] == 200:
                    break
            if time.monotonic() > deadline or not process.child.alive():
                pytest.fail(f"the service did not start:\n{svc.log()}")
            time.sleep(0.2)
        yield svc
    finally:
        process.child.stop(20)
        process.close()
        shutil.rmtree(process.socket_dir)  # serve's watchdog's, in serve


def test_gunicorn_takes_what_nginx_passes_on(service):
    # request lines up to nginx's 8 KB buffers, many headers, long header lines
    assert service.get("/metrics?" + "a" * 8000)[0] == 200
    assert service.get("/metrics", "".join(f"X-H{i}: v\r\n" for i in range(1000)))[0] == 200
    assert service.get("/metrics", f"X-Long: {'v' * 8180}\r\n")[0] == 200


def test_requests_leave_no_access_lines_nginx_writes_those(service):
    marker = "/metrics?no-access-line"
    assert service.get(marker)[0] == 200
    assert service.get("/metrics", "Connection: close\r\n")[0] == 200  # after the first
    assert marker not in service.log()
    assert "uvicorn.access" not in service.log()


def test_without_a_model_server_ping_says_why_in_json(service):
    status, _, body = service.get("/ping")
    assert status == 503 and orjson.loads(body)["error"].startswith("Not ready: ")


def test_sockets_are_for_serves_user_only(service):
    """nginx's workers run as serve's user (as root too): the folder and the socket are that
    user's alone, so no other local user reaches the service."""
    process = service.process
    folder = process.socket_dir.stat()
    sockets = [Path(process.socket_path).stat()]
    assert all(stat.S_ISSOCK(s.st_mode) for s in sockets)
    assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.geteuid()
    assert all(stat.S_IMODE(s.st_mode) == 0o600 for s in sockets)


def test_its_settings_come_from_its_config_file_only(service):
    """The command line names the config file, nothing else; it listens on no TCP port."""
    config_path = service.process.child.argv[3]
    config = ServiceConfig.from_file(Path(config_path))
    master = psutil.Process(service.process.child.pid)
    assert master.cmdline()[3:] == [config_path]
    assert config.socket_path == service.process.socket_path
    assert len(service.workers()) == config.workers
    for process in (master, *master.children()):
        assert process.net_connections(kind="inet") == []


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_new_workers_answer_while_requests_pour_in(service):
    """The gunicorn master forks each new worker; a thread of the master holding a lock at
    that moment would leave the worker waiting for it forever: the master has none."""
    stop = threading.Event()
    answered = [0]

    def flood() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if service.get("/metrics", timeout=2)[0] == 200:
                    answered[0] += 1

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        assert _wait(lambda: answered[0] > 20, 20)
        master = psutil.Process(service.process.child.pid)
        assert master.num_threads() == 1, [t.id for t in master.threads()]
        for cycle in range(30):
            (worker,) = service.workers()
            os.kill(worker, signal.SIGKILL)
            new = _wait(lambda old=worker: bool(service.workers() - {old}), 10)
            assert new, f"cycle {cycle}: no new worker"
            try:
                status = service.get("/metrics", timeout=10)[0]
            except TimeoutError:
                pytest.fail(f"cycle {cycle}: the new worker did not answer within 10 s")
            assert status == 200
    finally:
        stop.set()
        sender.join(5)
    assert "WORKER TIMEOUT" not in service.log()
