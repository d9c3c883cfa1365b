"""A pool of handler processes (host.py) for one environment: its command, start, readiness,
stop. serve supervises a single-model endpoint's pool like its other children; a multi-model
load starts its model's pool detached (`start_detached`), and an unload stops it (`stop`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from process_utils import tree
from sagemaker_serving.environments.host import PID_NAME, SOCKET_NAME, STATUS_NAME
from sagemaker_serving.user_code.loading import UserCodeError

POLL_SECONDS = 0.02
STOP_SECONDS = 5.0
STOPPED_NAME = "stopped"  # in the pool's folder once `stop` began: its calls' ends are no crash


class PoolError(UserCodeError):
    """The handler processes did not start: the message says why (the user's import error,
    or the deadline)."""


class PoolTimeout(PoolError):
    """The handler processes were not ready by the deadline."""


@dataclass(frozen=True)
class PoolSpec:
    """What a pool runs: the environment's interpreter, the user's code and directories."""

    directory: Path  # short: it holds the socket (108 bytes at most)
    python: str
    code_dir: Path
    paths: tuple[str, ...]
    module: str = "inference"
    processes: int = 1
    log_format: str = "text"

    @property
    def socket(self) -> str:
        return str(self.directory / SOCKET_NAME)


def new_pool_dir(parent: Path | None = None) -> Path:
    """A new 0700 folder for a pool's socket and status (short: under `parent`, else the temp
    folder)."""
    return Path(tempfile.mkdtemp(prefix="sagemaker-handlers-", dir=parent))


def command(spec: PoolSpec, lifeline_fd: int | None, daemon: bool = False) -> list[str]:
    argv = [
        spec.python,
        "-m",
        "sagemaker_serving.environments.host",
        "--dir",
        str(spec.directory),
        "--code-dir",
        str(spec.code_dir),
        "--module",
        spec.module,
        "--processes",
        str(spec.processes),
        "--log-format",
        spec.log_format,
    ]
    for path in spec.paths:
        argv += ["--path", path]
    if lifeline_fd is not None:
        argv += ["--lifeline-fd", str(lifeline_fd)]
    return [*argv, "--daemon"] if daemon else argv


def environment(base: Mapping[str, str]) -> dict[str, str]:
    """A child's environment (a pool's, pip's): the service's, without what would put the
    service's own packages on another interpreter's path."""
    return {k: v for k, v in base.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def read_status(directory: Path) -> dict | None:
    try:
        return json.loads((directory / STATUS_NAME).read_text())
    except (FileNotFoundError, ValueError):
        return None


def wait_ready(
    directory: Path, deadline: float, alive: Callable[[], bool] | None = None
) -> list[str]:
    """The handler functions, once every process imported the user's code. PoolError with
    the import error, when the pool ended (`alive`, by default `running`), or past `deadline`
    (time.monotonic())."""
    while True:
        status = read_status(directory)
        if status is not None and status.get("ready"):
            return list(status.get("functions") or [])
        if status is not None and "error" in status:
            raise PoolError(str(status["error"]))
        if not (alive() if alive is not None else running(directory)):
            raise PoolError("the handler processes ended during start-up (see the log)")
        if time.monotonic() > deadline:
            raise PoolTimeout("the handler processes were not ready in time")
        time.sleep(POLL_SECONDS)


def start_detached(spec: PoolSpec, lifeline_fd: int | None, deadline: float) -> list[str]:
    """Start a pool that outlives the process starting it (a multi-model load in one
    gunicorn worker; any worker may unload it) and wait until it is ready; stopped again on
    failure. Returns its handler functions."""
    with contextlib.suppress(subprocess.TimeoutExpired):  # the starter killed: see wait_ready
        subprocess.run(
            command(spec, lifeline_fd, daemon=True),
            env=environment(os.environ),
            pass_fds=(lifeline_fd,) if lifeline_fd is not None else (),
            stdin=subprocess.DEVNULL,
            timeout=max(0.1, deadline - time.monotonic()),
        )
    try:
        return wait_ready(spec.directory, deadline)
    except BaseException:
        stop(spec.directory, time.monotonic() + STOP_SECONDS)
        raise


def running(directory: Path) -> bool:
    """Whether the pool's master runs (or is still starting)."""
    return _pid(directory) != 0


def stopped(directory: Path) -> bool:
    """Whether the pool was stopped (its model unloaded, or serve stopping), not crashed."""
    return (directory / STOPPED_NAME).exists() or not directory.exists()


def member(pid: int, directory: str | Path) -> bool:
    """Whether process `pid` is one of the pool's in `directory` (its master or a worker: their
    command line names it), not another process that took a pid or a socket over."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"\0--dir\0" + os.fsencode(str(directory)) + b"\0" in b"\0" + f.read()
    except OSError:
        return False


def _pid(directory: Path) -> int:
    """The master's pid while it runs (0: none, or gone)."""
    try:
        pid = int((directory / PID_NAME).read_text())
    except (FileNotFoundError, ValueError):
        return -1  # not written yet
    found = tree.proc(pid)
    return pid if found and tree.alive(found) and member(pid, directory) else 0


def stop(directory: Path, deadline: float) -> None:
    """SIGTERM to the pool's process group, SIGKILL past `deadline` to its master and what ran
    under it (a handler's detached child too); its folder removed."""
    with contextlib.suppress(OSError):
        (directory / STOPPED_NAME).touch()
    pid = _pid(directory)
    master = tree.proc(pid) if pid > 0 else None
    if master is not None:
        under = tree.descendants(pid)  # the master stops them itself, unless it is killed
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        _wait_gone(pid, deadline)
        tree.kill_all([master, *under], time.monotonic() + 1.0)  # those still running
    shutil.rmtree(directory, ignore_errors=True)


def _wait_gone(pid: int, deadline: float) -> None:
    """Until process `pid` ended (a zombie too), or `deadline`."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        os.close(fd)
