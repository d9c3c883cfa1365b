"""`serve`: the container's entry point. Writes the configs, starts nginx and the model
servers, supervises them, and shuts down in order on SIGTERM.

    serve [--model-dir /opt/ml/model] [--run-dir DIR] [--host 0.0.0.0]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import log_setup
from .execution_parameters import execution_parameters
from .front_metrics import nginx_access_log
from .model_discovery import Model, ModelDiscoveryError, default_model, discover_models
from .model_server_command import (
    count_gpus,
    find_model_server,
    gpu_assignment,
    model_server_command,
    model_server_environment,
)
from .model_server_health import PROMETHEUS_PATH, instance_up, model_available
from .nginx_config import (
    FAST_PATH_LOCATIONS,
    NGINX_DIR,
    SERVICE_COMMON_LOCATIONS,
    SERVICE_LOCATIONS,
    NginxLayout,
    NginxSetupError,
    find_nginx,
    multi_model_locations,
    render_file,
    service_upstream,
    size_text,
    upstream_servers,
)
from .ports import allocate_model_server_ports
from .service_process import ServiceProcess, mme_state_dir, service_process
from .settings import Settings, SettingsError
from .supervisor import Child, Supervisor, stop_all
from .tfs_config import batching_parameters_text, model_config_text
from .universal_code import UniversalCodeError
from .user_code import UserCodeError

log = logging.getLogger("serve")

DEFAULT_MODEL_DIR = Path("/opt/ml/model")
MULTI_MODEL_DIR = Path("/opt/ml/models")  # where SageMaker puts multi-model endpoint models
SHUTDOWN_GRACE_SECONDS = 20  # nginx drains in-flight requests; SageMaker kills at 30 s
DRAIN_NOTICE_SECONDS = 1.0  # /ping reads 503 this long before nginx stops accepting
RESPONSE_BUFFER_BYTES = 100 * 1024 * 1024


class StartupError(RuntimeError):
    """Start-up cannot go on; the message says why."""


@dataclass
class Stack:
    """Everything serve started and the files it wrote."""

    settings: Settings
    run_dir: Path
    models: list[Model]
    default_model: str
    rest_ports: list[int]
    grpc_ports: list[int]
    nginx: Child
    nginx_conf: NginxConf
    service: ServiceProcess
    model_servers: list[Child] = field(default_factory=list)

    @property
    def children(self) -> list[Child]:
        return [self.nginx, self.service.child, *self.model_servers]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="serve", description="Serve TensorFlow SavedModels the SageMaker way."
    )
    parser.add_argument(
        "command", nargs="?", default="serve", choices=["serve"], help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help=f"default: {DEFAULT_MODEL_DIR} ({MULTI_MODEL_DIR} on a multi-model endpoint)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where generated configs go (default: a new temporary directory)",
    )
    parser.add_argument(
        "--host", default="0.0.0.0", help="address nginx listens on (default: %(default)s)"
    )
    return parser.parse_args(argv)


def prepare_run_dir(requested: Path | None) -> Path:
    if requested is None:
        return Path(tempfile.mkdtemp(prefix="sagemaker-serve-"))
    requested.mkdir(parents=True, exist_ok=True)
    return requested.resolve()


def child_environment(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = settings.omp_num_threads
    return env


def write_model_server_files(
    settings: Settings, models: list[Model], run_dir: Path
) -> tuple[Path, Path | None]:
    config = run_dir / "model-config.cfg"
    config.write_text(model_config_text(models))
    log.info("model config %s:\n%s", config, config.read_text())
    batching = None
    if settings.enable_batching:
        batching = run_dir / "batching-config.cfg"
        batching.write_text(batching_parameters_text(settings))
        log.info("batching parameters %s:\n%s", batching, batching.read_text())
    return config, batching


def model_server_children(
    settings: Settings, models: list[Model], run_dir: Path, ports: list[tuple[int, int]]
) -> list[Child]:
    config, batching = write_model_server_files(settings, models, run_dir)
    monitoring = run_dir / "monitoring.cfg"
    monitoring.write_text(f'prometheus_config {{ enable: true, path: "{PROMETHEUS_PATH}" }}\n')
    executable, ours = find_model_server()
    log.info("model server: %s (%s)", executable, "ours" if ours else "tensorflow_model_server")
    assignments = gpu_assignment(settings.instance_count, settings.gpu_memory_margin, count_gpus())
    children = []
    for i, ((grpc_port, rest_port), (device, fraction)) in enumerate(
        zip(ports, assignments, strict=True)
    ):
        env = model_server_environment(settings, child_environment(settings), device)
        argv = model_server_command(
            executable,
            ours,
            settings,
            grpc_port=grpc_port,
            rest_port=rest_port,
            model_config_path=config,
            batching_path=batching,
            monitoring_config_path=monitoring,
            gpu_memory_fraction=fraction,
        )
        children.append(Child(f"model-server-{i}", argv, env))
    return children


@dataclass
class NginxConf:
    """nginx.conf and the values it is rendered from (re-rendered to drain)."""

    layout: NginxLayout
    path: Path
    values: dict[str, object]

    def write(self, draining: bool = False) -> Path:
        self.values["DRAINING"] = "1" if draining else "0"
        self.path.write_text(render_file(self.layout.nginx_dir, self.values))
        return self.path


def ping_targets(rest_ports: list[int], models: list[Model]) -> str:
    """The internal URIs /ping checks: every model on every model server instance (with no
    models, multi-model: every instance answering at all)."""
    if not models:
        return " ".join(f"/_instance/{port}{PROMETHEUS_PATH}" for port in rest_ports)
    return " ".join(f"/_instance/{port}/v1/models/{m.name}" for port in rest_ports for m in models)


def nginx_child(
    settings: Settings,
    layout: NginxLayout,
    run_dir: Path,
    host: str,
    models: list[Model],
    default: str,
    rest_ports: list[int],
    service: ServiceProcess,
) -> tuple[Child, NginxConf]:
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (run_dir / "nginx-tmp" / sub).mkdir(parents=True, exist_ok=True)
    listen = f"{host}:{settings.bind_to_port}" if host else str(settings.bind_to_port)
    values: dict[str, object] = {
        "NJS_MODULE": layout.njs_module,
        "WORKER_PROCESSES": "auto",
        "RUN_DIR": run_dir,
        "LOG_LEVEL": settings.nginx_log_level,
        "SHUTDOWN_GRACE": SHUTDOWN_GRACE_SECONDS,
        "NGINX_DIR": layout.nginx_dir,
        "ACCESS_LOG": "/dev/stdout",
        "ACCESS_LOG_FORMAT": "sagemaker_json" if settings.log_format == "json" else "sagemaker",
        "BODY_LIMIT": size_text(settings.body_limit_bytes),
        "RESPONSE_BUFFER": size_text(RESPONSE_BUFFER_BYTES),
        "PROXY_TIMEOUT": settings.proxy_read_timeout_seconds,
        "TFS_SERVERS": upstream_servers(rest_ports),
        "EXTRA_UPSTREAMS": service_upstream(service.socket_path),
        "LISTEN": listen,
        "DEFAULT_MODEL": default,
        "EXECUTION_PARAMETERS": json.dumps(execution_parameters(settings)),
        "INVOCATIONS_LOCATIONS": (
            SERVICE_LOCATIONS if service.handles_invocations else FAST_PATH_LOCATIONS
        )
        + (
            "\n\n" + multi_model_locations(settings.wait_time_seconds + 10)
            if settings.multi_model
            else ""
        ),
        "SERVICE_LOCATIONS": SERVICE_COMMON_LOCATIONS,
        "PYTHON_SERVICE": "1",
        "METRICS_LOG": nginx_access_log(service.metrics_socket),
        # multi-model: 200 once the service is up, whatever is loaded
        "PING_TARGETS": f"{ping_targets(rest_ports, models)} /_service/ping".strip(),
    }
    nginx_conf = NginxConf(layout, run_dir / "nginx.conf", values)
    conf = nginx_conf.write()
    argv = [layout.binary, "-e", "stderr", "-p", str(run_dir), "-c", str(conf)]
    check = Child("nginx-config-test", [*argv, "-t", "-q"])
    check.start()
    if not check.wait(30) or check.proc is None or check.proc.returncode != 0:
        raise StartupError(f"nginx rejected the generated config {conf} (see the log above)")
    nginx = Child("nginx", argv, child_environment(settings), graceful_signal=signal.SIGQUIT)
    return nginx, nginx_conf


def build_stack(args: argparse.Namespace, settings: Settings) -> Stack:
    run_dir = prepare_run_dir(args.run_dir)
    log.info("run directory: %s", run_dir)
    if settings.multi_model:  # models come and go through the /models API
        if not args.model_dir.is_dir():
            raise StartupError(f"model directory {args.model_dir} does not exist")
        models: list[Model] = []
        default = ""
        log.info("multi-model endpoint: models under %s are loaded on request", args.model_dir)
    else:
        models = discover_models(args.model_dir)
        default = default_model(models, settings.default_model_name).name
        log.info(
            "models: %s (default %s)",
            ", ".join(f"{m.name} {list(m.versions)}" for m in models),
            default,
        )
    ports = allocate_model_server_ports(settings)
    rest_ports = [rest for _, rest in ports]
    layout = find_nginx(NGINX_DIR)
    service = service_process(
        settings, args.model_dir, run_dir, default, ports, child_environment(settings)
    )
    nginx, nginx_conf = nginx_child(
        settings, layout, run_dir, args.host, models, default, rest_ports, service
    )
    stack = Stack(
        settings=settings,
        run_dir=run_dir,
        models=models,
        default_model=default,
        rest_ports=rest_ports,
        grpc_ports=[grpc for grpc, _ in ports],
        nginx=nginx,
        nginx_conf=nginx_conf,
        service=service,
        model_servers=model_server_children(settings, models, run_dir, ports),
    )
    if settings.log_format == "json":  # children that write plain text get their lines wrapped
        for child in stack.children:
            child.relay = log_setup.relay_as_json
    return stack


def forget_models_on_crash(stack: Stack) -> Callable[[Child], None]:
    """Multi-model: when a model server dies, every model counts as unloaded (invoke answers
    404, so SageMaker loads it again) and the other instances drop theirs."""
    from .model_client import ModelServerClient
    from .multi_model import MultiModelManager, Registry

    manager = MultiModelManager(
        Registry(mme_state_dir(stack.run_dir)),
        ModelServerClient(stack.rest_ports, stack.grpc_ports),
        stack.run_dir,
        float(stack.settings.wait_time_seconds),
        0,
    )

    def on_death(child: Child) -> None:
        if child in stack.model_servers:
            names = manager.forget_all()
            log.warning("%s died: %d model(s) now count as unloaded", child.name, len(names))

    return on_death


def wait_until_ready(stack: Stack, supervisor: Supervisor) -> bool:
    """Until every model is AVAILABLE on every instance (False on deadline, stop or death)."""
    deadline = time.monotonic() + stack.settings.wait_time_seconds
    pending = {(port, m.name) for port in stack.rest_ports for m in stack.models}
    if not stack.models:  # multi-model: every instance up (it loads models on request)
        pending = {(port, "") for port in stack.rest_ports}
    while pending:
        if supervisor.stopping:
            return False
        dead = [c for c in stack.children if not c.alive()]
        if dead:
            log.error("%s exited during start-up", ", ".join(c.name for c in dead))
            return False
        if time.monotonic() > deadline:
            log.error(
                "models not AVAILABLE after SAGEMAKER_TFS_WAIT_TIME_SECONDS=%d: %s",
                stack.settings.wait_time_seconds,
                sorted(pending),
            )
            return False
        pending = {
            (port, name)
            for port, name in pending
            if not (model_available(port, name, 1.0) if name else instance_up(port, 1.0))
        }
        if pending:
            supervisor.sleep(0.25)
    return True


def shutdown(stack: Stack) -> None:
    """Ping goes 503, nginx drains in-flight requests, then the model servers stop."""
    log.info("shutting down: draining requests (up to %ds)", SHUTDOWN_GRACE_SECONDS)
    if stack.nginx.alive():
        stack.nginx_conf.write(draining=True)
        stack.nginx.signal(signal.SIGHUP)  # reload: /ping answers 503 from now on
        time.sleep(DRAIN_NOTICE_SECONDS)
    stack.nginx.stop(SHUTDOWN_GRACE_SECONDS + 2)
    stack.service.child.stop(10)
    stop_all(stack.model_servers, 5)
    stack.service.cleanup()
    log.info("stopped")


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
        log_setup.configure("INFO", settings.log_format)
        if args.model_dir is None:
            args.model_dir = MULTI_MODEL_DIR if settings.multi_model else DEFAULT_MODEL_DIR
        stack = build_stack(args, settings)
    except (
        SettingsError,
        ModelDiscoveryError,
        NginxSetupError,
        StartupError,
        UserCodeError,
        UniversalCodeError,
        OSError,
    ) as exc:
        log.error("cannot start: %s", exc)
        return 2
    supervisor = Supervisor(stack.children)
    supervisor.install_signal_handlers()
    if settings.multi_model:
        supervisor.on_death = forget_models_on_crash(stack)
    try:
        stack.nginx.start()
        stack.service.child.start()
        for child in stack.model_servers:
            child.start()
        if not wait_until_ready(stack, supervisor):
            return 0 if supervisor.stopping else 1
        log.info(
            "ready: http://%s:%d (models %s)",
            args.host or "0.0.0.0",
            settings.bind_to_port,
            ", ".join(m.name for m in stack.models),
        )
        failed = supervisor.run()
        if failed is not None:
            log.error(
                "%s died %d times within %.0fs: giving up",
                failed.name,
                len(failed.deaths),
                failed.policy.window_seconds,
            )
            return 1
        return 0
    finally:
        shutdown(stack)
        if args.run_dir is None:
            shutil.rmtree(stack.run_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    log_setup.configure("INFO", "text")  # until the settings say which format
    sys.exit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
