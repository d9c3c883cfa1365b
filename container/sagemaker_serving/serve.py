"""`serve`: the container's entry point. Writes the configs, starts nginx and the model
servers, supervises them, and shuts down in order on SIGTERM.

    serve [--model-dir /opt/ml/model] [--run-dir DIR] [--host 0.0.0.0]
"""

from __future__ import annotations

import argparse
import functools
import http.client
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# As PID 1 (the image's entry point) a signal without a handler is dropped: a SIGTERM sent while
# the imports below run (0.2-0.6 s) was lost, and the container ran on to SageMaker's SIGKILL 30
# s later. Noted from here on; run() stops at once when one came (signals in the last few
# milliseconds of the interpreter's own start are still dropped).
EARLY_STOPS: list[int] = []
if os.getpid() == 1:
    for _signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(_signum, lambda signum, _frame: EARLY_STOPS.append(signum))

from process_utils import tree
from process_utils.arguments import ArgumentParser
from process_utils.exit_reason import exit_reason
from sagemaker_serving.config import log_setup
from sagemaker_serving.config.model_discovery import (
    Model,
    default_model,
    discover_models,
    misplaced_code,
)
from sagemaker_serving.config.settings import VARIABLES, Settings
from sagemaker_serving.config.tfs_config import batching_parameters_text, model_config_text
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.errors import StartupError
from sagemaker_serving.launcher import run_directory
from sagemaker_serving.launcher.front_port import check_front_port, listening
from sagemaker_serving.launcher.model_server_command import (
    LOOPBACK_GUARD_LIBRARY,
    check_extra_flags,
    count_gpus,
    find_model_server,
    gpu_assignment,
    model_server_command,
    model_server_environment,
)
from sagemaker_serving.launcher.nginx_config import (
    NGINX_DIR,
    NginxConf,
    NginxLayout,
    find_nginx,
    nginx_conf,
)
from sagemaker_serving.launcher.request_counts import RequestCounts
from sagemaker_serving.launcher.service_process import (
    SERVICE_ERROR_FILE,
    ServiceProcess,
    mme_state_dir,
    service_process,
)
from sagemaker_serving.launcher.supervisor import Child, Supervisor, stop_all
from sagemaker_serving.launcher.watchdog import Watchdog
from sagemaker_serving.multimodel.environments import stop_model_pools
from sagemaker_serving.tfs_client.health import PROMETHEUS_PATH, get

log = logging.getLogger("serve")

DEFAULT_MODEL_DIR = Path("/opt/ml/model")
MULTI_MODEL_DIR = Path("/opt/ml/models")  # where SageMaker puts multi-model endpoint models
# Shutdown: SageMaker sends SIGKILL 30 s after SIGTERM. serve exits within one budget, whatever
# its children do: /ping reads 503 (DRAIN_NOTICE), nginx drains in-flight requests (at most
# NGINX_DRAIN_SECONDS, its worker_shutdown_timeout), then the Python service and the model
# servers stop (BACKEND_STOP_SECONDS; gunicorn's graceful_timeout is within it). Whoever
# overruns its share is SIGKILLed with its whole process group.
SHUTDOWN_BUDGET_SECONDS = 25.0
DRAIN_NOTICE_SECONDS = 1.0  # /ping reads 503 this long before nginx stops accepting
BACKEND_STOP_SECONDS = 4.0
KILL_RESERVE_SECONDS = 1.0  # after each SIGKILL: the time to reap the group
NGINX_STOP_SECONDS = (
    SHUTDOWN_BUDGET_SECONDS - DRAIN_NOTICE_SECONDS - BACKEND_STOP_SECONDS - 2 * KILL_RESERVE_SECONDS
)
NGINX_DRAIN_SECONDS = int(NGINX_STOP_SECONDS) - 1  # nginx ends its own drain before we kill it
NGINX_TEST_SECONDS = 30
READY_POLL_SECONDS = 0.05  # start-up: how often the model servers and the service are asked
CHILD_DRAIN_SECONDS = 1.0  # a child dead during start-up: the time its last words get to arrive


@dataclass
class Stack:
    """Everything serve started and the files it wrote."""

    settings: Settings
    run_dir: Path
    models: list[Model]
    nginx: Child
    nginx_conf: NginxConf
    service: ServiceProcess
    counts: RequestCounts  # every request nginx answers, counted
    model_servers: list[Child] = field(default_factory=list)
    startup_failure: str | None = None  # why start-up failed, said again as the last line

    @property
    def backends(self) -> list[Child]:
        """What nginx passes requests to: stopped once it has drained."""
        return [*self.service.children, *self.model_servers]

    @property
    def children(self) -> list[Child]:
        return [self.nginx, *self.backends]


DESCRIPTION = f"""\
Serve TensorFlow SavedModels the SageMaker way: nginx listens on port 8080
(SAGEMAKER_BIND_TO_PORT) for GET /ping, POST /invocations and, on a multi-model endpoint
(SAGEMAKER_MULTI_MODEL=true), the /models API, in front of the TensorFlow model servers and
the Python service that runs code/inference.py. Ctrl-C or SIGTERM stops it within
{SHUTDOWN_BUDGET_SECONDS:.0f} s."""
DOCS = """\
docs: docs/getting-started.md, docs/settings.md (every setting) and docs/operations.md of
this project (README.md lists every page)"""


def settings_help() -> str:
    """The environment variables serve reads, each with its default (from the settings'
    declarations: the same as docs/settings.md's table)."""
    width = max(len(v.name) for v in VARIABLES)
    lines = [f"  {v.name:<{width}}  {v.default_text.replace('`', '')}" for v in VARIABLES]
    return "settings (environment variables, read once at start; default):\n" + "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="serve",
        description=DESCRIPTION,
        epilog=f"{settings_help()}\n\n{DOCS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def child_environment(settings: Settings) -> dict[str, str]:
    """serve's environment for its children, but the metrics folder of its own counts
    (request_counts.py: the service's child gets it anew)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["OMP_NUM_THREADS"] = settings.omp_num_threads
    return env


def model_server_children(
    settings: Settings, models: list[Model], run_dir: Path, ports: list[tuple[int, int]]
) -> list[Child]:
    """The model server instances, their config files written."""
    config = run_dir / "model-config.cfg"
    config.write_text(model_config_text(models))
    log.info("model config %s: %s", config, model_config_text(models, one_line=True))
    batching = None
    if settings.enable_batching:
        batching = run_dir / "batching-config.cfg"
        batching.write_text(batching_parameters_text(settings))
        one_line = " ".join(batching.read_text().split())  # `name { value: N }`s: no strings
        log.info("batching parameters %s: %s", batching, one_line)
    monitoring = run_dir / "monitoring.cfg"
    monitoring.write_text(f'prometheus_config {{ enable: true, path: "{PROMETHEUS_PATH}" }}\n')
    executable, ours = find_model_server()
    log.info("model server: %s (%s)", executable, "ours" if ours else "tensorflow_model_server")
    check_extra_flags(executable, settings.model_server_flags)
    if not LOOPBACK_GUARD_LIBRARY.is_file():
        log.warning(
            "%s not found (make install builds it): every local user can reach the model "
            "server's ports%s",
            LOOPBACK_GUARD_LIBRARY,
            "" if ours else ", and tensorflow_model_server listens on every interface",
        )
    gpus = count_gpus()
    assignments = gpu_assignment(settings.instance_count, settings.gpu_memory_margin, gpus)
    children = []
    for i, ((grpc_port, rest_port), (device, fraction)) in enumerate(
        zip(ports, assignments, strict=True)
    ):
        env = model_server_environment(settings, child_environment(settings), ours, device, gpus)
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


def nginx_child(
    settings: Settings,
    layout: NginxLayout,
    run_dir: Path,
    host: str,
    default: str,
    rest_ports: list[int],
    service: ServiceProcess,
    counts: RequestCounts,
) -> tuple[Child, NginxConf]:
    """nginx with the run's config, once `nginx -t` accepts it (StartupError if not)."""
    conf = nginx_conf(
        settings,
        layout,
        run_dir,
        listen=f"{host}:{settings.bind_to_port}" if host else str(settings.bind_to_port),
        default_model=default,
        rest_ports=rest_ports,
        service_socket=service.socket_path,
        user_code=service.handles_invocations,
        shutdown_grace=NGINX_DRAIN_SECONDS,
        counts_path=counts.nginx_path,
    )
    path = conf.write()
    try:
        test = subprocess.run(
            [*conf.command(), "-t", "-q"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(counts.write_fd,),
            timeout=NGINX_TEST_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise StartupError(f"nginx -t did not finish within {NGINX_TEST_SECONDS} s") from None
    output_relay(settings)("nginx-config-test", io.BytesIO(test.stdout))  # before our message
    if test.returncode != 0:
        raise StartupError(f"nginx rejected the generated config {path} (see the log above)")
    nginx = Child(
        "nginx",
        conf.command(),
        child_environment(settings),
        graceful_signal=signal.SIGQUIT,
        pass_fds=(counts.write_fd,),
    )
    return nginx, conf


def output_relay(settings: Settings) -> Callable[[str, IO[bytes]], None]:
    """How serve writes a child's lines: as they are, or (json logs) as JSON log lines."""
    return functools.partial(log_setup.relay, as_json=settings.log_format == "json")


def warn_misplaced_code(settings: Settings, model_dir: Path) -> None:
    """A `code/` or an `inference.py` under the model directory that nothing reads."""
    from_s3 = bool(settings.universal_bucket and settings.universal_prefix)
    where = (
        f"s3://{settings.universal_bucket}/{settings.universal_prefix} (universal code)"
        if from_s3
        else f"{model_dir / 'code'}/ (inference.py in code/ at the top of the model directory)"
    )
    for path in misplaced_code(model_dir, None if from_s3 else model_dir / "code"):
        log.warning("%s is not read: user code is read from %s", path, where)


def build_stack(args: argparse.Namespace, settings: Settings, watchdog: Watchdog) -> Stack:
    """The stack, not started; the watchdog removes every temporary directory it makes once
    serve is gone (or stops its watchdog: start-up stopped short, or the shutdown ended)."""
    check_front_port(args.host, settings.bind_to_port)  # before anything is made or started
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
        warn_misplaced_code(settings, args.model_dir)
    ports = settings.model_server_ports()
    rest_ports = [rest for _, rest in ports]
    layout = find_nginx(NGINX_DIR)
    run_dir = run_directory.prepare(args.run_dir)
    if args.run_dir is None:
        watchdog.remove_on_exit(run_dir)
    log.info("run directory: %s", run_dir)
    names = [m.name for m in models]
    service = service_process(
        settings, args.model_dir, run_dir, names, default, ports, child_environment(settings)
    )
    for directory in (service.socket_dir, service.pool_dir):
        if directory is not None:
            watchdog.remove_on_exit(directory)
    counts = RequestCounts(str(service.metrics_dir), default)
    nginx, nginx_conf = nginx_child(
        settings, layout, run_dir, args.host, default, rest_ports, service, counts
    )
    stack = Stack(
        settings=settings,
        run_dir=run_dir,
        models=models,
        nginx=nginx,
        nginx_conf=nginx_conf,
        service=service,
        model_servers=model_server_children(settings, models, run_dir, ports),
        counts=counts,
    )
    for child in stack.children:  # serve writes every line of the stack itself
        child.relay = output_relay(settings)
        child.watchdog = watchdog
    return stack


def forget_models_on_crash(stack: Stack) -> Callable[[Child], None]:
    """Multi-model: when a model server dies, every model counts as unloaded (invoke answers
    404, so SageMaker loads it again). Marking the registry stale takes no lock, so the
    supervisor never waits on a load in progress; the service's next load or unload sends
    the surviving instances the list without the old models."""
    from sagemaker_serving.multimodel.registry import Registry

    registry = Registry(mme_state_dir(stack.run_dir))

    def on_death(child: Child) -> None:
        if child in stack.model_servers:
            count = len(registry.read())
            registry.invalidate()
            log.warning("%s died: %d model(s) now count as unloaded", child.name, count)

    return on_death


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def service_not_ready(socket_path: str, timeout: float = 1.0) -> str | None:
    """None once the Python service answers GET /ping with 200 (the one readiness: every
    model AVAILABLE on every instance, the handlers imported, their processes answering);
    else why not, as it says."""
    reply = get(_UnixHTTPConnection(socket_path, timeout), "/ping")
    if reply is None:
        return "the Python service does not answer yet"
    if reply[0] == 200:
        return None
    try:
        return str(json.loads(reply[1])["error"])
    except (ValueError, KeyError, TypeError):
        return f"the Python service answered {reply[0]}"


def wait_until_ready(stack: Stack, supervisor: Supervisor) -> bool:
    """Until the Python service's /ping answers 200 and nginx listens (False on deadline,
    stop or death); then lets nginx's /ping ask the service (its ready file)."""
    deadline = time.monotonic() + stack.settings.wait_time_seconds
    port = stack.settings.bind_to_port
    pending: str | None = "not asked yet"
    listens = False  # ready is never said before nginx listens
    while pending is not None or not listens:
        if supervisor.stopping:
            return False
        dead = [c for c in stack.children if not c.alive()]
        if dead:
            deaths = []
            for child in dead:
                code = child.proc.returncode if child.proc is not None else None
                reason = "exited" if code is None else exit_reason(code, supervisor.memory)
                log.error("%s %s during start-up", child.name, reason)
                last = child.last_line(CHILD_DRAIN_SECONDS) if code and code > 0 else None
                deaths.append(f"{child.name} {reason}" + (f": {last}" if last else ""))
            stack.startup_failure = startup_failure(stack) or "; ".join(deaths)
            if stack.nginx in dead:
                log.error(
                    "if nginx could not listen on port %d (see its message above), stop what "
                    "holds it or set SAGEMAKER_BIND_TO_PORT to a free port",
                    port,
                )
            return False
        if time.monotonic() > deadline:
            stack.startup_failure = (
                f"not ready after SAGEMAKER_TFS_WAIT_TIME_SECONDS="
                f"{stack.settings.wait_time_seconds}: "
                f"{pending or f'nginx is not listening on port {port}'}"
            )
            log.error("%s", stack.startup_failure)
            return False
        listens = listens or listening(stack.nginx.pid, port)
        pending = service_not_ready(stack.service.socket_path)
        if pending is not None or not listens:
            supervisor.sleep(READY_POLL_SECONDS)
    stack.nginx_conf.ready_file.touch()
    return True


def startup_failure(stack: Stack) -> str | None:
    """What a child that died during start-up left behind: the user code's import error."""
    if stack.service.pool_dir is not None:
        status = handler_pool.read_status(stack.service.pool_dir) or {}
        if "error" in status:
            return str(status["error"])
    error_file = stack.run_dir / SERVICE_ERROR_FILE
    if error_file.is_file():
        return error_file.read_text(errors="replace").strip() or None
    return None


def shutdown(stack: Stack, requested_at: float) -> None:
    """Ping goes 503, nginx drains in-flight requests, then the Python service and the model
    servers stop; all within SHUTDOWN_BUDGET_SECONDS of `requested_at` (time.monotonic())."""
    deadline = requested_at + SHUTDOWN_BUDGET_SECONDS
    backends_at = deadline - KILL_RESERVE_SECONDS - BACKEND_STOP_SECONDS
    log.info(
        "shutting down: draining requests (up to %ds), done within %.0fs",
        NGINX_DRAIN_SECONDS,
        SHUTDOWN_BUDGET_SECONDS,
    )
    if stack.nginx.alive():
        stack.nginx_conf.write(draining=True)
        stack.nginx.signal(signal.SIGHUP)  # reload: /ping answers 503 from now on
        time.sleep(max(0.0, min(DRAIN_NOTICE_SECONDS, backends_at - time.monotonic())))
    unanswered = stack.counts.unanswered
    stack.nginx.stop(backends_at - KILL_RESERVE_SECONDS - time.monotonic())
    stack.counts.stop()  # what nginx wrote last
    if cut := stack.counts.unanswered - unanswered:
        log.warning(
            "%d request(s) still in progress after the %ds drain were cut off without an answer",
            cut,
            NGINX_DRAIN_SECONDS,
        )
    stop_all(stack.backends, deadline - KILL_RESERVE_SECONDS - time.monotonic())
    if stack.settings.multi_model:  # the handler pools of models with code of their own
        stop_model_pools(mme_state_dir(stack.run_dir), deadline - time.monotonic())
    for child in stack.children:  # what they wrote last, before our last line
        child.drain(max(0.0, deadline - time.monotonic()))
    stack.service.close()
    log.info("stopped")


def stop_leftovers(budget_seconds: float, keep: set[int]) -> None:
    """Kill what is still under serve once its children stopped: what user code started and
    left running (a detached child, a daemon), a pip still installing; not `keep` (the
    watchdog)."""
    left = [p for p in tree.descendants(os.getpid()) if p.pid not in keep]
    killed = tree.kill_all(left, time.monotonic() + max(0.5, budget_seconds))
    if killed:
        log.warning("killed %d process(es) left running by the stack (user code's, pip)", killed)


class StopDuringStartup(Exception):
    """SIGTERM or SIGINT while start-up prepares (a pip install): stop there, cleanly."""


def _stop_during_startup(signum: int, frame: object) -> None:
    raise StopDuringStartup(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    # orphans of what serve starts stay under it (a handler's detached child, a pool's daemon):
    # the supervisor reaps them, and the shutdown and the watchdog find them to stop them
    subreaper = tree.become_subreaper()
    watchdog = Watchdog()  # from the start: a pip install at start-up is under serve too
    try:
        watchdog.start()
    except OSError as exc:
        log.error("cannot start: the watchdog: %s", exc)
        return 2
    # until the supervisor takes them: a stop while pip runs kills pip (environments/build)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_during_startup)
    try:
        if EARLY_STOPS:  # came while serve was importing its modules
            raise StopDuringStartup(signal.Signals(EARLY_STOPS[0]).name)
        settings = Settings.from_env()
        log_setup.configure("INFO", settings.log_format)
        if args.model_dir is None:
            args.model_dir = MULTI_MODEL_DIR if settings.multi_model else DEFAULT_MODEL_DIR
        stack = build_stack(args, settings, watchdog)
        # made now: its OOM-kill baseline is past start-up's (a pip install's kill is no child's)
        supervisor = Supervisor(
            stack.children, watchdog=watchdog, reap_orphans=subreaper or os.getpid() == 1
        )
        supervisor.install_signal_handlers()
    except StopDuringStartup as exc:
        watchdog.stop()  # and with it the directories start-up made
        log.info("stopped during start-up (%s)", exc)
        return 0
    except (StartupError, OSError) as exc:  # OSError: a file start-up could not write
        watchdog.stop()
        log.error("cannot start: %s", exc)
        return 2
    if settings.multi_model:
        supervisor.on_death = forget_models_on_crash(stack)
    try:
        # the slowest to be ready first; the handler processes before the service asks them
        for child in [*stack.model_servers, *reversed(stack.service.children)]:
            child.start()
        stack.counts.start()
        stack.nginx.start()
        if not wait_until_ready(stack, supervisor):
            if supervisor.stopping:
                return 0
            return 1
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
        stopped_at = supervisor.stop_requested_at or time.monotonic()
        shutdown(stack, stopped_at)
        keep = {watchdog.proc.pid} if watchdog.proc is not None else set()
        stop_leftovers(stopped_at + SHUTDOWN_BUDGET_SECONDS - time.monotonic(), keep)
        # kills whatever is still listed (nothing, after a clean shutdown), removes the
        # temporary directories
        watchdog.stop()
        if stack.startup_failure:
            log.error("cannot start: %s", stack.startup_failure)


def main(argv: list[str] | None = None) -> None:
    log_setup.configure("INFO", "text")  # until the settings say which format
    sys.exit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
