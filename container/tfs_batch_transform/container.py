"""Start the container natively (`serve` beside this interpreter) on free loopback ports, as
SageMaker starts one per instance, and always stop it."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from process_utils import die_with_parent, free_port_range, terminate

from .client import Endpoint

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0  # SageMaker's SIGTERM -> SIGKILL grace


def serve_command() -> str:
    """`serve` beside sys.executable (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "serve"
    return str(beside) if beside.exists() else "serve"


class LocalContainer:
    """`serve --model-dir DIR` on a free loopback port; a context manager that waits for /ping
    (up to `startup_timeout` s) on entry and stops the container (SIGTERM, then SIGKILL) on
    exit, also on errors and Ctrl-C. Its folder (a temporary one unless `run_dir` is given) is
    removed then, but for its log when `keep_log` is set (a job that failed, a container that
    did not start: the log whose path was printed at the start stays)."""

    def __init__(
        self,
        model_dir: Path,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 300.0,
        run_dir: Path | None = None,
    ):
        self.model_dir = Path(model_dir).resolve()
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self._own_run_dir = run_dir is None
        self.run_dir = Path(run_dir or tempfile.mkdtemp(prefix="tfs-batch-transform-"))
        self.log_path = self.run_dir / "serve.log"
        self.keep_log = False
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        instances = int(self.extra_env.get("SAGEMAKER_TFS_INSTANCE_COUNT", "1"))
        port, _ = free_port_range(2 * instances + 3)
        env = {
            **os.environ,
            "SAGEMAKER_BATCH": "true",
            "SAGEMAKER_BIND_TO_PORT": str(port),
            "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{port + 2 * instances + 2}",
            **self.extra_env,
        }
        self.url = f"http://127.0.0.1:{port}"
        cmd = [
            serve_command(),
            "--model-dir",
            str(self.model_dir),
            "--run-dir",
            str(self.run_dir / "serve"),
            "--host",
            "127.0.0.1",
        ]
        log.info("starting the container: %s (log: %s)", " ".join(cmd), self.log_path)
        try:  # from the log's creation on: a SIGTERM while it starts removes the folder too
            with open(self.log_path, "ab") as out:
                self.proc = subprocess.Popen(
                    cmd,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
                )
            Endpoint(self.url).wait_healthy(self.startup_timeout, alive=self.alive)
        except BaseException as err:
            tail = self.log_tail()
            self.keep_log = isinstance(err, Exception)  # it failed: its log stays (not Ctrl-C)
            self.stop()
            if isinstance(err, Exception):
                raise RuntimeError(f"{err}; container log tail:\n{tail}") from err
            raise
        log.info("container ready at %s", self.url)
        return self.url

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        lines = [line for line in text.splitlines() if '"GET /ping ' not in line]
        return "\n".join(lines)[-chars:]

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT s; the exit code."""
        code = None if self.proc is None else terminate(self.proc, STOP_TIMEOUT)
        if self.keep_log and self.log_path.exists():
            shutil.rmtree(self.run_dir / "serve", ignore_errors=True)
            log.info("the container's log is kept: %s", self.log_path)
        elif self._own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        return code

    def __enter__(self) -> LocalContainer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
