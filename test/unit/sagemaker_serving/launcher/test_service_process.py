"""sagemaker_serving.launcher.service_process: what serve prepares for the Python service (its
config file, which holds every setting; its command line, which names the file and the
inherited descriptors; its sockets), without starting it."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from sagemaker_serving.config.access import read_token
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.service_process import (
    ServiceProcess,
    fresh_mme_state_dir,
    mme_state_dir,
    service_process,
)

PORTS = [(9000, 8501), (9002, 8503)]


def prepared(tmp_path: Path, code: str | None = None, **env: str) -> ServiceProcess:
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    if code is not None:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(code)
    settings = Settings.from_env(env, cpu_count=4)
    return service_process(settings, model_dir, tmp_path / "run", "m", PORTS, {"PYTHONPATH": "x"})


def option(service: ServiceProcess, name: str) -> str:
    return next(a.split("=", 1)[1] for a in service.child.argv if a.startswith(f"--{name}="))


def config_of(service: ServiceProcess) -> ServiceConfig:
    return ServiceConfig.from_file(Path(service.child.argv[3]))


@pytest.fixture
def service(tmp_path: Path):
    (tmp_path / "run").mkdir()
    process = prepared(tmp_path)
    yield process
    process.cleanup()


def test_without_user_code_it_takes_only_the_binary_formats(service: ServiceProcess):
    assert not service.handles_invocations
    assert config_of(service).workers == 2  # at most 2 without user code
    assert config_of(service).socket_path == service.socket_path


def test_settings_reach_the_service_in_its_config_and_only_there(tmp_path: Path):
    (tmp_path / "run").mkdir()
    env = {
        "SAGEMAKER_GUNICORN_WORKERS": "3",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "45",
        "SAGEMAKER_GUNICORN_LOGLEVEL": "warning",
        "SAGEMAKER_LOG_FORMAT": "json",
    }
    service = prepared(tmp_path, code="def handler(data, context): pass\n", **env)
    try:
        config = config_of(service)
        assert (config.workers, config.worker_timeout_seconds) == (3, 45)
        assert (config.log_level, config.log_format) == ("warning", "json")
        # the command line: the module, its config file, the descriptors it inherits
        metrics_fd, secret_fd, _ = service.child.pass_fds
        assert service.child.argv[1:] == [
            "-m",
            "sagemaker_serving.python_service",
            str(tmp_path / "run" / "service.json"),
            f"--front-metrics-fd={metrics_fd}",
            f"--token-fd={secret_fd}",
        ]
    finally:
        service.cleanup()


def test_the_config_file_says_what_serve_knows(service: ServiceProcess, tmp_path: Path):
    config = config_of(service)
    assert config.default_model == "m"
    assert (config.rest_ports, config.grpc_ports) == ([8501, 8503], [9000, 9002])
    assert config.request_timeout_seconds == 59.0  # a second before nginx gives up
    assert config.model_root == str((tmp_path / "model").resolve())
    assert config.state_dir == str(mme_state_dir(tmp_path / "run"))
    assert config.memory_reserve_bytes == 256 << 20
    assert (config.worker_class, config.threads) == ("uvicorn", 8)  # where handlers run


def test_sockets_are_private_and_the_secret_is_inherited(service: ServiceProcess):
    mode = stat.S_IMODE(service.socket_dir.stat().st_mode)
    assert mode == 0o700  # serve's user only: the whole stack runs as it
    metrics_fd, token_fd, lifeline = service.child.pass_fds
    assert stat.S_ISFIFO(os.fstat(lifeline).st_mode)  # the read end: EOF once serve is gone
    assert not os.get_inheritable(service.lifeline)  # the write end stays with serve
    metrics = socket.socket(fileno=os.dup(metrics_fd))
    try:  # the socket serve's relay sends to: UDP on loopback, with a large receive buffer
        assert metrics.type == socket.SOCK_DGRAM
        assert metrics.getsockname() == ("127.0.0.1", service.metrics_port)
        assert metrics.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) > 10 * 4096
    finally:
        metrics.close()
    assert option(service, "front-metrics-fd") == str(metrics_fd)
    assert option(service, "token-fd") == str(token_fd)
    assert read_token(token_fd) == service.token
    assert service.token not in " ".join(service.child.argv)
    assert service.child.env is not None and "PYTHONPATH" not in service.child.env
    assert service.child.env["PROMETHEUS_MULTIPROC_DIR"].endswith("prometheus")


def test_the_front_metrics_port_comes_from_the_safe_port_range(tmp_path: Path):
    from process_utils import free_port_range

    low, high = free_port_range(5)  # 2 model servers (PORTS' count), then the relay
    (tmp_path / "run").mkdir()
    env = {"SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    process = prepared(tmp_path, **env)
    try:
        assert process.metrics_port == low + 4
    finally:
        process.cleanup()


def test_cleanup_closes_the_descriptors_and_removes_the_sockets(tmp_path: Path):
    (tmp_path / "run").mkdir()
    service = prepared(tmp_path)
    service.cleanup()
    assert not service.socket_dir.exists()
    for fd in service.child.pass_fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_user_code_gets_every_worker_and_its_paths(tmp_path: Path):
    (tmp_path / "run").mkdir()
    service = prepared(tmp_path, code="def handler(data, context): pass\n")
    try:
        assert service.handles_invocations
        config = config_of(service)
        assert config.workers == 4
        assert config.python_paths == [str(tmp_path / "model" / "code")]
    finally:
        service.cleanup()


@pytest.mark.parametrize("worker_class", ["gthread", "sync", "gevent"])
def test_the_worker_class_and_threads_reach_the_service_config(tmp_path: Path, worker_class):
    (tmp_path / "run").mkdir()
    env = {"SAGEMAKER_GUNICORN_WORKER_CLASS": worker_class, "SAGEMAKER_GUNICORN_THREADS": "3"}
    service = prepared(tmp_path, **env)  # gevent needs no gevent: every worker is uvicorn's
    try:
        config = config_of(service)
        assert (config.worker_class, config.threads) == (worker_class, 3)
    finally:
        service.cleanup()


def test_a_new_run_starts_with_no_multi_model_state(tmp_path: Path):
    state = mme_state_dir(tmp_path)
    (state / "old-model").mkdir(parents=True)
    assert fresh_mme_state_dir(tmp_path) == state
    assert list(state.iterdir()) == []
