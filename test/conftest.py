"""Shared test helpers: model server processes on free loopback ports that always stop."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import psutil
import pytest
import requests

from model_server_process import ModelServerProcess
from process_utils import free_port_range, terminate

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parent.parent
SUPPORT = REPO / "test" / "support"  # example_models, format_cases, hostile_cases
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))
from wheels import make_wheel, tiny_wheel  # noqa: E402, F401 - what tests import from here

VENV_BIN = Path(sys.executable).parent
OUR_SERVER = str(VENV_BIN / "tfs-model-server")


def start_model_server(
    args: Sequence[str], log_path: Path, ready_model: str | None = None, timeout: float = 120
) -> ModelServerProcess:
    """Start our tfs-model-server; wait until ready_model is AVAILABLE (or the process exits)."""
    server = ModelServerProcess(list(args), log_path, executable=OUR_SERVER).start()
    if ready_model is None:
        return server
    if not server.wait_ready([ready_model], timeout) and server.alive():
        server.stop()
        raise TimeoutError(f"model server not ready in {timeout}s:\n{server.log()[-3000:]}")
    return server


class Stoppable(Protocol):
    def stop(self) -> int | None: ...


S = TypeVar("S", bound=Stoppable)


@contextlib.contextmanager
def running(server: S, problem: Callable[[], str | None]) -> Iterator[S]:
    """`server` for the duration of the block, always stopped after it; `problem()`, asked
    first, names what is wrong with it (raised as RuntimeError) or None."""
    try:
        found = problem()
        if found is not None:
            raise RuntimeError(found)
        yield server
    finally:
        server.stop()


def wait_for_ping(url: str, alive: Callable[[], bool], timeout: float, interval: float) -> bool:
    """True once GET `url`/ping answers 200; False on timeout or once `alive()` is False."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{url}/ping", timeout=2).status_code == 200:
                return True
        time.sleep(interval)
    return False


def model_server(
    args: Sequence[str], log_path: Path, ready_model: str | None = None
) -> contextlib.AbstractContextManager[ModelServerProcess]:
    """A running model server for the duration of the block; it fails loudly if it died."""
    server = start_model_server(args, log_path, ready_model)

    def exited() -> str | None:
        if server.alive() or server.proc is None:
            return None
        return f"model server exited {server.proc.returncode}:\n{server.log()}"

    return running(server, exited)


@pytest.fixture(scope="session")
def digits_model(tmp_path_factory) -> Path:
    """The digits classifier (example_models), trained once per test session."""
    import example_models as em

    return em.ensure_built("digits", tmp_path_factory.getbasetemp() / "shared-models" / "digits")


MODEL_ROOT_MODELS = (
    "half_plus_two",
    "half_plus_three",
    "half_plus_two_tf2",
    "multi_io",
    "string_input",
    "keras",
    "variable_length",
)


@pytest.fixture(scope="session")
def model_root(tmp_path_factory) -> Path:
    """Real SavedModels built once per session with example_models, each in a folder of its
    example model's name (MODEL_ROOT_MODELS)."""
    import example_models as em

    root = tmp_path_factory.mktemp("models")
    return em.build_models(root, {name: name for name in MODEL_ROOT_MODELS})


def command_line(proc: psutil.Process) -> str:
    """A process's command line, "" once it ended (serve reaps what it adopted, such as a
    multi-model handler pool, within its poll interval: until then it is a zombie)."""
    try:
        return " ".join(proc.cmdline())
    except psutil.NoSuchProcess:  # ZombieProcess too
        return ""


# ----- the whole native stack: serve -> nginx + model servers ---------------------------------

SERVE = str(VENV_BIN / "serve")


def serve_command(model_dir: Path, run_dir: Path, serve: str = SERVE) -> list[str]:
    """serve on loopback, serving `model_dir`, its files in `run_dir`."""
    return [serve, "--model-dir", str(model_dir), "--run-dir", str(run_dir), "--host", "127.0.0.1"]


class ServeProcess:
    """`serve` started on free loopback ports; `url` is its nginx front door."""

    def __init__(
        self,
        model_dir: Path,
        run_dir: Path,
        env: dict[str, str],
        log_path: Path,
        serve: str = SERVE,
    ):
        import subprocess

        self.port = int(env["SAGEMAKER_BIND_TO_PORT"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.run_dir = run_dir
        self.log_path = log_path
        low = int(env["SAGEMAKER_SAFE_PORT_RANGE"].split("-")[0])
        count = int(env.get("SAGEMAKER_TFS_INSTANCE_COUNT", "1"))
        self.rest_ports = [low + 2 * i + 1 for i in range(count)]
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            serve_command(model_dir, run_dir, serve),
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        """The log without the (many) /ping access lines."""
        text = self.log_path.read_text(errors="replace")
        return "\n".join(line for line in text.splitlines() if '"GET /ping ' not in line)

    def wait_healthy(self, timeout: float = 180) -> bool:
        return wait_for_ping(self.url, lambda: self.proc.poll() is None, timeout, 0.3)

    def stop(self, timeout: float = 40) -> int | None:
        code = terminate(self.proc, timeout)
        self._log.close()
        return code


def serve_stack(
    model_dir: Path,
    tmp: Path,
    env: dict[str, str] | None = None,
    instances: int = 1,
    serve: str = SERVE,
) -> contextlib.AbstractContextManager[ServeProcess]:
    """The whole stack for the duration of the block, healthy on entry, always stopped
    (`serve`: another checkout's entry point, to compare two trees)."""
    # one free block: the front port first, then the model servers' range (no overlap)
    port, high = free_port_range(2 * instances + 3)
    low = port + 1
    settings = {
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}",
        "SAGEMAKER_TFS_INSTANCE_COUNT": str(instances),
        **(env or {}),
    }
    server = ServeProcess(model_dir, tmp / "run", settings, tmp / "serve.log", serve)

    def unhealthy() -> str | None:
        if server.wait_healthy():
            return None
        return f"serve did not become healthy:\n{server.log()[-5000:]}"

    return running(server, unhealthy)


def run_serve(
    model_dir: Path, tmp: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """serve run to its end on free loopback ports (where it refuses to start), its output
    captured as text."""
    port, high = free_port_range(5)
    settings = {
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
        **(env or {}),
    }
    return subprocess.run(
        serve_command(model_dir, tmp / "run"),
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def s3_url(tmp_path_factory) -> Iterator[str]:
    """moto's S3-compatible server on a free loopback port, always stopped."""
    moto = VENV_BIN / "moto_server"
    if not moto.exists():
        pytest.skip("moto[server] is not installed (pip install -e '.[dev]')")
    port, _ = free_port_range(1)
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/moto-api/", timeout=2).status_code < 500:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto_server did not start on {url}")
            time.sleep(0.2)
        yield url
    finally:
        terminate(proc, 10)
        log.close()


# ----- /metrics of a running stack ------------------------------------------------------------


def request_count(url: str, route: str, status: int, model: str) -> float:
    """sagemaker_requests_total of the stack at `url` for one route, status and model."""
    import re

    text = requests.get(f"{url}/metrics", timeout=10).text
    pattern = (
        r'sagemaker_requests_total\{model="' + re.escape(model) + r'",route="' + re.escape(route)
        + r'",status="' + str(status) + r'"\} (\S+)'
    )  # fmt: skip
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


def settled_counts(url: str, keys, seconds: float = 10.0) -> list[float]:
    """The counts of `keys` ((route, status, model)) once two reads a flush interval apart
    agree: nginx writes its count lines within COUNTS_FLUSH_SECONDS (request_counts.py) and
    each process moves its figures into /metrics within FLUSH_SECONDS (metrics.py), so a
    request just answered may not be counted yet."""
    from sagemaker_serving.launcher.request_counts import COUNTS_FLUSH_SECONDS
    from sagemaker_serving.service.metrics import FLUSH_SECONDS

    deadline = time.monotonic() + seconds
    counts = [request_count(url, *key) for key in keys]
    while time.monotonic() < deadline:
        time.sleep(2 * (FLUSH_SECONDS + COUNTS_FLUSH_SECONDS))
        again = [request_count(url, *key) for key in keys]
        if again == counts:
            return counts
        counts = again
    raise AssertionError(f"the counts did not settle within {seconds} s: {counts}")
