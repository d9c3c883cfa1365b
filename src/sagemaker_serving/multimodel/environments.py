"""Multi-model models whose code/ brings packages of its own: an environment and a pool of
handler processes each (environments/), made at load, ended at unload.

A model whose code/ holds only inference.py runs in the service's workers, beside every other
such model. One with a requirements.txt, a lib/ or modules beside inference.py gets its own
environment (two models may pin different versions of one package) and its own handler
processes, at most SAGEMAKER_MME_MAX_ENVIRONMENTS at once (507 past it, or when memory is
short). Each running pool is recorded in the state directory (`pools/`), so any worker can
stop it and serve stops them all at shutdown.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from sagemaker_serving.environments import build
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.service.user_code import RequirementsTimeout, UserCodeError

log = logging.getLogger(__name__)

POOLS_DIR = "pools"
ENVIRONMENTS_DIR = "environments"
STOP_SECONDS = 5.0


@dataclass
class ModelEnvironments:
    """Environments and handler pools of the models that need their own."""

    state_dir: Path
    site: Path
    processes: int
    max_count: int
    memory_reserve_bytes: int
    lifeline_fd: int | None
    log_format: str = "text"

    def prepare(self, code_dir: Path, internal_name: str, deadline: float) -> str:
        """Install the code's requirements and, when it needs them, start its handler
        processes; their folder ("" when the handlers run in the workers). 400 with pip's
        or the import's message, 504 past the deadline, 507 past the bound."""
        env_dir = self.state_dir / ENVIRONMENTS_DIR / internal_name
        try:
            environment = build.prepare(
                code_dir, env_dir, self.site, max(1.0, deadline - time.monotonic()), True
            )
        except UserCodeError as exc:
            shutil.rmtree(env_dir, ignore_errors=True)
            status = 504 if isinstance(exc, RequirementsTimeout) else 400
            raise MultiModelError(str(exc), status) from None
        if environment.python is None:
            return ""
        try:
            self._check_room()
            return self._start(environment, internal_name, deadline)
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise

    def _check_room(self) -> None:
        running = len(self.records())
        if running >= self.max_count:
            raise MultiModelError(
                f"{running} models with an environment of their own are loaded, the most "
                f"allowed (SAGEMAKER_MME_MAX_ENVIRONMENTS={self.max_count}): unload one first",
                507,
            )
        if psutil.virtual_memory().available < self.memory_reserve_bytes:
            raise MultiModelError("Not enough memory to start the model's handler processes", 507)

    def _start(self, environment: build.Environment, internal_name: str, deadline: float) -> str:
        directory = handler_pool.new_pool_dir()
        spec = handler_pool.PoolSpec(
            directory,
            str(environment.python),
            environment.code_dir,
            environment.paths,
            module=f"inference_{internal_name}",
            processes=self.processes,
            log_format=self.log_format,
        )
        record = self._record_path(directory)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(str(directory))
        started = time.monotonic()
        try:
            handler_pool.start_detached(spec, self.lifeline_fd, deadline)
        except handler_pool.PoolError as exc:
            record.unlink(missing_ok=True)
            status = 504 if isinstance(exc, handler_pool.PoolTimeout) else 400
            raise MultiModelError(str(exc), status) from None
        log.info(
            "handler processes for %s ready in %.1fs (%s)",
            internal_name,
            time.monotonic() - started,
            environment.reason,
        )
        return str(directory)

    def release(self, pool_dir: str, internal_name: str) -> None:
        """Stop a model's handler processes and remove its environment."""
        if pool_dir:
            handler_pool.stop(Path(pool_dir), time.monotonic() + STOP_SECONDS)
            self._record_path(Path(pool_dir)).unlink(missing_ok=True)
        if internal_name:
            shutil.rmtree(self.state_dir / ENVIRONMENTS_DIR / internal_name, ignore_errors=True)

    def records(self) -> list[Path]:
        with contextlib.suppress(FileNotFoundError):
            return sorted((self.state_dir / POOLS_DIR).iterdir())
        return []

    def _record_path(self, directory: Path) -> Path:
        return self.state_dir / POOLS_DIR / directory.name


def stop_model_pools(state_dir: Path, budget_seconds: float) -> None:
    """serve, at shutdown: stop every handler pool a load started."""
    deadline = time.monotonic() + max(0.5, budget_seconds)
    with contextlib.suppress(FileNotFoundError):
        for record in sorted((state_dir / POOLS_DIR).iterdir()):
            with contextlib.suppress(OSError):
                handler_pool.stop(Path(record.read_text()), deadline)
            record.unlink(missing_ok=True)
