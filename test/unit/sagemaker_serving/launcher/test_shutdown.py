"""serve's shutdown keeps to its budget whatever the children do (each ignores its signal)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from sagemaker_serving import serve
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.service_process import ServiceProcess
from sagemaker_serving.launcher.supervisor import Child

IGNORING = (
    "import signal, time\n"
    "for s in (signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


class _Conf:
    def __init__(self) -> None:
        self.draining = False

    def write(self, draining: bool = False) -> None:
        self.draining = draining


class _Counts:
    unanswered = 0

    def stop(self) -> None:
        pass


def _stubborn(name: str, graceful: int = signal.SIGTERM) -> Child:
    child = Child(name, [sys.executable, "-c", IGNORING], graceful_signal=graceful)
    child.relay = lambda _name, stream: None  # stdout piped, read below
    child.start()
    assert child.proc is not None and child.proc.stdout is not None
    assert child.proc.stdout.readline().strip() == b"ready"
    return child


def _stack(tmp_path: Path, nginx: Child, service_child: Child, model_server: Child) -> serve.Stack:
    """A Stack of these children (no configs, no ports), its service sockets in tmp_path."""
    socket_dir = tmp_path / "socket"
    socket_dir.mkdir()
    _, lifeline = os.pipe()
    service = ServiceProcess(
        service_child,
        str(socket_dir / "s.sock"),
        socket_dir,
        False,
        tmp_path / "prometheus",
        lifeline,
    )
    return serve.Stack(
        settings=Settings.from_env({}),
        run_dir=tmp_path,
        models=[],
        nginx=nginx,
        nginx_conf=_Conf(),  # type: ignore[arg-type]
        service=service,
        counts=_Counts(),  # type: ignore[arg-type]
        model_servers=[model_server],
    )


def test_the_budget_fits_sagemakers_sigkill():
    parts = (
        serve.DRAIN_NOTICE_SECONDS
        + serve.NGINX_DRAIN_SECONDS
        + serve.BACKEND_STOP_SECONDS
        + 2 * serve.KILL_RESERVE_SECONDS
    )
    assert parts <= serve.SHUTDOWN_BUDGET_SECONDS < 30


def test_shutdown_ends_within_the_budget_when_every_child_ignores_its_signal(
    monkeypatch, tmp_path: Path
):
    # the same arithmetic on a 6 s budget
    monkeypatch.setattr(serve, "SHUTDOWN_BUDGET_SECONDS", 6.0)
    monkeypatch.setattr(serve, "BACKEND_STOP_SECONDS", 1.5)
    monkeypatch.setattr(serve, "NGINX_DRAIN_SECONDS", 1)
    nginx = _stubborn("nginx", signal.SIGQUIT)
    service_child = _stubborn("python-service")
    model_server = _stubborn("model-server-0")
    children = [nginx, service_child, model_server]
    processes = [psutil.Process(c.pid) for c in children if c.pid is not None]
    stack = _stack(tmp_path, nginx, service_child, model_server)
    requested = time.monotonic()
    try:
        serve.shutdown(stack, requested)
        elapsed = time.monotonic() - requested
        assert stack.nginx_conf.draining  # type: ignore[attr-defined]
        assert not any(c.alive() for c in children)
        # each overran its share and was killed, and all within the budget
        assert [c.proc.returncode for c in children if c.proc] == [-signal.SIGKILL] * 3
        assert elapsed < 6.0 + 1.0, elapsed
    finally:
        for process in processes:
            if process.is_running():
                process.kill()
    with pytest.raises(OSError):
        os.fstat(stack.service.lifeline)  # serve's end of the pipes closed


@pytest.mark.parametrize("late", [22.0, 40.0])
def test_a_late_shutdown_still_stops_everything(tmp_path: Path, late: float):
    # the budget counts from SIGTERM: time already spent (a slow start step) shortens it
    model_server = _stubborn("model-server-0")
    nginx = Child("nginx", [sys.executable, "-c", "pass"])
    service_child = Child("python-service", [sys.executable, "-c", "pass"])
    stack = _stack(tmp_path, nginx, service_child, model_server)
    started = time.monotonic()
    serve.shutdown(stack, started - late)
    assert not model_server.alive()
    assert time.monotonic() - started < max(0.0, serve.SHUTDOWN_BUDGET_SECONDS - late) + 3
