"""Prepare and describe the Python service process (gunicorn + falcon, ASGI) for serve."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.environments.build import (
    InstallLimits,
    container_site,
    has_user_code,
    prepare,
)
from sagemaker_serving.launcher.supervisor import Child
from sagemaker_serving.launcher.universal_code import download_universal_code

log = logging.getLogger(__name__)

SERVICE_ERROR_FILE = "service-error.txt"  # why the service's workers could not start


@dataclass(frozen=True)
class ServiceProcess:
    child: Child
    socket_path: str
    socket_dir: Path
    handles_invocations: bool  # True with user code; else it only takes the binary formats

    metrics_dir: Path  # the Prometheus values of every process (serve's counts too)
    lifeline: int  # the write end of the pipe whose end-of-file tells pools serve is gone
    handlers: Child | None = None  # the handler pool of a single-model endpoint's own code
    pool_dir: Path | None = None

    @property
    def children(self) -> list[Child]:
        """The service, and its handler processes when it has some."""
        return [self.child, *([self.handlers] if self.handlers is not None else [])]

    def close(self) -> None:
        """Close serve's ends of the pipes (its directories are the watchdog's to remove)."""
        for fd in (*self.child.pass_fds, self.lifeline):
            with contextlib.suppress(OSError):
                os.close(fd)


def mme_state_dir(run_dir: Path) -> Path:
    """Where the multi-model registry, its lock and per-model packages live."""
    return run_dir / "multi-model"


def aws_variables(default_model: str, ports: list[tuple[int, int]]) -> dict[str, str]:
    """What the AWS container's serve.py sets for its Python service, so its handlers can read
    them: the default model (none on a multi-model endpoint) and the model servers' ports."""
    variables = {
        "TFS_GRPC_PORTS": ",".join(str(grpc) for grpc, _ in ports),
        "TFS_REST_PORTS": ",".join(str(rest) for _, rest in ports),
    }
    if default_model:
        variables["TFS_DEFAULT_MODEL_NAME"] = default_model
    return variables


def service_process(
    settings: Settings,
    model_dir: Path,
    run_dir: Path,
    models: list[str],
    default_model: str,
    ports: list[tuple[int, int]],
    env: dict[str, str],
) -> ServiceProcess:
    """Make the user's code ready (environments/), write the service config, and build the
    gunicorn child (and the handler pool's, when the code needs processes of its own)."""
    code_dir = model_dir / "code"
    env = {**env, **aws_variables(default_model, ports)}
    if settings.universal_bucket and settings.universal_prefix:
        code_dir = download_universal_code(
            settings.universal_bucket, settings.universal_prefix, run_dir / "universal-code"
        )
    user_code = has_user_code(code_dir) or settings.multi_model
    python_paths: list[str] = []
    lifeline, lifeline_end = os.pipe()  # serve keeps the write end (not inherited)
    handlers: Child | None = None
    pool_dir: Path | None = None
    site = container_site(run_dir / "container-site") if user_code else None
    if site is not None:
        limits = InstallLimits(settings.pip_max_memory_mb, settings.environment_max_disk_mb)
        environment = prepare(
            code_dir, run_dir / "environment", site, settings.wait_time_seconds, False, limits
        )
        if environment.python is None:  # the handlers run in the service's workers
            python_paths = list(environment.paths)
        else:
            pool_dir = handler_pool.new_pool_dir()
            spec = handler_pool.PoolSpec(
                pool_dir,
                environment.python,
                code_dir,
                environment.paths,
                processes=settings.handler_processes,
                log_format=settings.log_format,
            )
            handlers = Child(
                "handler-processes",
                handler_pool.command(spec, lifeline),
                handler_pool.environment(env),
                pass_fds=(lifeline,),
            )
            log.info(
                "handlers run in %d process(es) of their own (%s): %s",
                settings.handler_processes,
                environment.python,
                environment.reason,
            )
    # 0700 (mkdtemp's): for nginx's workers (serve's user) only; nginx's temporary files too
    socket_dir = Path(tempfile.mkdtemp(prefix="sagemaker-service-"))
    socket_path = str(socket_dir / "gunicorn.sock")
    config = ServiceConfig(
        code_dir=str(code_dir),
        default_model=default_model,
        models=models,
        rest_ports=[rest for _, rest in ports],
        grpc_ports=[grpc for grpc, _ in ports],
        # answer (504) a little before nginx gives up on the request
        request_timeout_seconds=max(1.0, settings.proxy_read_timeout_seconds - 1.0),
        max_response_bytes=settings.max_response_size,
        socket_path=socket_path,
        workers=settings.gunicorn_workers if user_code else min(2, settings.gunicorn_workers),
        worker_timeout_seconds=settings.gunicorn_timeout_seconds,
        log_level=settings.gunicorn_log_level,
        python_paths=python_paths,
        worker_class=settings.gunicorn_worker_class,
        threads=settings.gunicorn_threads,
        multi_model=settings.multi_model,
        model_root=str(model_dir.resolve()),
        state_dir=str(mme_state_dir(run_dir)),
        load_timeout_seconds=float(settings.wait_time_seconds),
        memory_reserve_bytes=settings.mme_memory_reserve_mb * 1024 * 1024,
        handler_pool=str(pool_dir or ""),
        container_site=str(site or ""),
        handler_processes=settings.handler_processes,
        max_environments=settings.mme_max_environments,
        pip_max_memory_mb=settings.pip_max_memory_mb,
        environment_max_disk_mb=settings.environment_max_disk_mb,
        lifeline_fd=lifeline,
        log_format=settings.log_format,
        error_file=str(run_dir / SERVICE_ERROR_FILE),
        run_dir=str(run_dir.absolute()),
    )
    (run_dir / SERVICE_ERROR_FILE).unlink(missing_ok=True)
    # a new run starts with no models (its model servers have none), whatever an earlier run
    # with the same --run-dir left behind
    shutil.rmtree(mme_state_dir(run_dir), ignore_errors=True)
    mme_state_dir(run_dir).mkdir(parents=True)
    config_path = run_dir / "service.json"
    config_path.write_text(config.to_json())
    metrics_dir = run_dir / "prometheus"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "sagemaker_serving.python_service", str(config_path)]
    child_env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    child_env.pop("PYTHONPATH", None)
    log.info(
        "Python service: %s (%s)",
        "user code in " + str(code_dir) if user_code else "built-in formats only",
        ", ".join(python_paths) or "no extra paths",
    )
    child = Child("python-service", argv, child_env, pass_fds=(lifeline,))
    return ServiceProcess(
        child,
        socket_path,
        socket_dir,
        user_code,
        metrics_dir,
        lifeline_end,
        handlers,
        pool_dir,
    )
