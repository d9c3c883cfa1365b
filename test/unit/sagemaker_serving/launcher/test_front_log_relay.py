"""serve's relay of nginx's request log: whole lines, in order, the file kept small."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from sagemaker_serving.launcher import front_log_relay
from sagemaker_serving.launcher.front_log_relay import FrontLogRelay, new_log, nginx_access_log
from sagemaker_serving.service.front_metrics import REPORT_BYTES, split_report

TOKEN = "run-secret"


class Service:
    """The service's end: a loopback UDP socket, reports read back as lines."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def lines(self) -> list[bytes]:
        out: list[bytes] = []
        while True:
            try:
                secret, lines = split_report(self.sock.recv(REPORT_BYTES))
            except TimeoutError:
                return out
            assert secret == TOKEN.encode()
            out += lines


@pytest.fixture
def service():
    s = Service()
    yield s
    s.sock.close()


class Nginx:
    """A worker's view of the log: the descriptor it inherited, appended to."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self.reloads = 0

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def reload(self) -> None:
        self.reloads += 1


def relay_for(path: Path, service: Service, retire_seconds: float = 60.0):
    new_log(path)
    nginx = Nginx(path)
    return FrontLogRelay(path, service.port, TOKEN, nginx.reload, retire_seconds), nginx


def test_whole_lines_are_relayed_in_order_and_a_partial_one_waits(tmp_path, service):
    relay, nginx = relay_for(tmp_path / "front.log", service)
    nginx.write("/invocations 200 m 0.001\n/ping 2")
    assert relay.relay() == 1
    assert service.lines() == [b"/invocations 200 m 0.001"]
    nginx.write("00 - 0.002\n")
    assert relay.relay() == 1
    assert relay.relay() == 0
    assert service.lines() == [b"/ping 200 - 0.002"]


def test_the_log_is_for_serves_user_only_and_starts_empty(tmp_path):
    path = tmp_path / "front.log"
    path.write_text("an earlier run's lines\n")
    os.chmod(path, 0o666)
    new_log(path)
    assert path.stat().st_size == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_nginx_writes_the_log_buffered(tmp_path):
    directive = nginx_access_log(tmp_path / "front.log")
    assert f"access_log {tmp_path / 'front.log'} sagemaker_metrics buffer=64k " in directive
    assert directive.rstrip().endswith(" flush=100ms;")  # every request: no condition


def test_what_was_read_is_punched_out(tmp_path, service, monkeypatch):
    monkeypatch.setattr(front_log_relay, "FREE_BYTES", 64 * 1024)
    relay, nginx = relay_for(tmp_path / "front.log", service)
    line = "/invocations 200 half_plus_three 0.001\n"
    for _ in range(200):
        nginx.write(line * 100)
    os.fsync(nginx.fd)
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * 8192)
    fd = os.open(probe, os.O_RDWR)
    try:
        if not front_log_relay.punch_hole(fd, 0, 4096):
            pytest.skip("this file system cannot punch holes")
    finally:
        os.close(fd)
    relayed = relay.relay()
    while relay.backlog:
        relayed += relay.relay()
    assert relayed == 20_000
    info = os.stat(tmp_path / "front.log")
    assert info.st_size == 20_000 * len(line)
    assert info.st_blocks * 512 < 64 * 1024 + 4096
    assert relay.holes and nginx.reloads == 0


def test_without_holes_a_new_file_replaces_a_full_one(tmp_path, service, monkeypatch):
    """The old file is read until nginx's old workers are gone: what they flush late counts."""
    monkeypatch.setattr(front_log_relay, "punch_hole", lambda *_: False)
    monkeypatch.setattr(front_log_relay, "FREE_BYTES", 0)
    monkeypatch.setattr(front_log_relay, "ROTATE_BYTES", 1000)
    path = tmp_path / "front.log"
    relay, old_worker = relay_for(path, service)
    old_worker.write("/ping 200 - 0.001\n" * 100)
    assert relay.relay() == 100
    assert old_worker.reloads == 1 and not relay.holes
    assert path.stat().st_size == 0  # a new file, for the new workers
    new_worker = Nginx(path)
    old_worker.write("/ping 200 - 0.002\n")  # an old worker's last buffer
    new_worker.write("/ping 200 - 0.003\n")
    assert relay.relay() == 2
    relay.retire_at = 0.0  # the old workers are gone
    relay.relay()
    assert relay.retiring is None
    assert service.lines()[-2:] == [b"/ping 200 - 0.002", b"/ping 200 - 0.003"]


def test_a_backlog_goes_out_in_steps_the_socket_holds(tmp_path, service):
    """What piled up while serve was held up: READ_BYTES a step, every line, in order."""
    relay, nginx = relay_for(tmp_path / "front.log", service)
    lines = [f"/invocations 200 model-{i} 0.001" for i in range(40_000)]
    nginx.write("".join(f"{line}\n" for line in lines))
    received: list[bytes] = []
    steps = 0
    while True:
        steps += 1
        relay.relay()
        received += service.lines()
        if not relay.backlog:
            break
    assert received == [line.encode() for line in lines]
    assert steps >= 40_000 * len(lines[0]) // front_log_relay.READ_BYTES


def test_stop_relays_the_last_lines(tmp_path, service):
    relay, nginx = relay_for(tmp_path / "front.log", service)
    relay.start()
    nginx.write("/ping 200 - 0.001\n")
    relay.stop()
    assert b"/ping 200 - 0.001" in service.lines()
    assert not relay.thread.is_alive()
