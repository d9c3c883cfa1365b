"""sagemaker_serving.launcher.service_process: what serve prepares for the Python service (its
config file, which holds every setting; its command line, which names the file and the
inherited descriptors; its sockets), without starting it."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.service_process import (
    ServiceProcess,
    mme_state_dir,
    service_process,
)

PORTS = [(9000, 8501), (9002, 8503)]


@pytest.fixture(autouse=True)
def temporary_dirs_in(tmp_path: Path, monkeypatch) -> None:
    """The service's socket folder (the watchdog's to remove in serve) under tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def prepared(tmp_path: Path, code: str | None = None, **env: str) -> ServiceProcess:
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    if code is not None:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(code)
    settings = Settings.from_env(env, cpu_count=4)
    env_vars = {"PYTHONPATH": "x"}
    return service_process(settings, model_dir, tmp_path / "run", ["m"], "m", PORTS, env_vars)


def option(service: ServiceProcess, name: str) -> str:
    return next(a.split("=", 1)[1] for a in service.child.argv if a.startswith(f"--{name}="))


def config_of(service: ServiceProcess) -> ServiceConfig:
    return ServiceConfig.from_file(Path(service.child.argv[3]))


@pytest.fixture
def service(tmp_path: Path):
    (tmp_path / "run").mkdir()
    process = prepared(tmp_path)
    yield process
    process.close()


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
        # the command line: the module and its config file, nothing else
        assert service.child.argv[1:] == [
            "-m",
            "sagemaker_serving.python_service",
            str(tmp_path / "run" / "service.json"),
        ]
    finally:
        service.close()


def test_the_config_file_says_what_serve_knows(service: ServiceProcess, tmp_path: Path):
    config = config_of(service)
    assert config.default_model == "m"
    assert (config.rest_ports, config.grpc_ports) == ([8501, 8503], [9000, 9002])
    assert config.request_timeout_seconds == 59.0  # a second before nginx gives up
    assert config.model_root == str((tmp_path / "model").resolve())
    assert config.state_dir == str(mme_state_dir(tmp_path / "run"))
    assert config.memory_reserve_bytes == 256 << 20
    assert (config.worker_class, config.threads) == ("uvicorn", 8)  # where handlers run


def test_sockets_are_private_and_the_lifeline_is_inherited(service: ServiceProcess):
    folder = service.socket_dir.stat()
    assert stat.S_IMODE(folder.st_mode) == 0o700  # serve's user only: the whole stack runs as it
    assert folder.st_uid == os.geteuid()
    (lifeline,) = service.child.pass_fds
    assert stat.S_ISFIFO(os.fstat(lifeline).st_mode)  # the read end: EOF once serve is gone
    assert not os.get_inheritable(service.lifeline)  # the write end stays with serve
    assert service.child.env is not None and "PYTHONPATH" not in service.child.env
    assert service.child.env["PROMETHEUS_MULTIPROC_DIR"] == str(service.metrics_dir)


def test_the_aws_containers_variables_reach_the_service_and_so_the_handlers(tmp_path: Path):
    # its serve.py sets them for its Python service: handlers written for it may read them
    (tmp_path / "run").mkdir()
    service = prepared(tmp_path, code="def handler(data, context): pass\n")
    try:
        assert service.child.env is not None
        assert service.child.env["TFS_DEFAULT_MODEL_NAME"] == "m"
        assert service.child.env["TFS_GRPC_PORTS"] == "9000,9002"
        assert service.child.env["TFS_REST_PORTS"] == "8501,8503"
    finally:
        service.close()


def test_close_closes_serves_ends_of_the_pipes(tmp_path: Path):
    (tmp_path / "run").mkdir()
    service = prepared(tmp_path)
    service.close()
    for fd in (*service.child.pass_fds, service.lifeline):
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
        service.close()


@pytest.mark.parametrize("worker_class", ["gthread", "sync", "gevent"])
def test_the_worker_class_and_threads_reach_the_service_config(tmp_path: Path, worker_class):
    (tmp_path / "run").mkdir()
    env = {"SAGEMAKER_GUNICORN_WORKER_CLASS": worker_class, "SAGEMAKER_GUNICORN_THREADS": "3"}
    service = prepared(tmp_path, **env)  # gevent needs no gevent: every worker is uvicorn's
    try:
        config = config_of(service)
        assert (config.worker_class, config.threads) == (worker_class, 3)
    finally:
        service.close()


def test_a_new_run_starts_with_no_multi_model_state(tmp_path: Path):
    state = mme_state_dir(tmp_path / "run")
    (state / "old-model").mkdir(parents=True)  # an earlier run's, in the same --run-dir
    service = prepared(tmp_path)
    try:
        assert list(state.iterdir()) == []
    finally:
        service.close()
