"""Multi-model models whose code/ brings packages of its own: an environment and a pool of
handler processes each (environments/), made at load, ended at unload.

A model whose code/ holds only inference.py runs in the service's workers, beside every other
such model. One with a requirements.txt, a lib/ or modules beside inference.py gets its own
environment (two models may pin different versions of one package) and its own handler
processes, at most SAGEMAKER_MME_MAX_ENVIRONMENTS at once (507 past it, or when memory is
short), refused before anything is installed.

Environments are kept after an unload, by what they are made of (build.environment_key): a
model loaded again starts its processes on the environment made before, without pip. The
least recently used ones that no model uses go past SAGEMAKER_MME_MAX_ENVIRONMENTS of them.
Each running pool is recorded in the state directory (`pools/`), so any worker can stop or
restart it and serve stops them all at shutdown.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from sagemaker_serving.environments import build
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.user_code.loading import UserCodeError, UserCodeTimeout

log = logging.getLogger(__name__)

POOLS_DIR = "pools"
ENVIRONMENTS_DIR = "environments"
ENVIRONMENT_FILE = "environment.json"
STOP_SECONDS = 5.0
LOCK_POLL_SECONDS = 0.05
RECORD_GRACE_SECONDS = 60.0  # a pool no model lists is a leftover only once this much older
# than a load can take (a load in progress has one too)


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
    load_timeout_seconds: float = 300.0
    limits: build.InstallLimits = field(default_factory=build.InstallLimits)

    def prepare(self, code_dir: Path, internal_name: str, deadline: float) -> tuple[str, str]:
        """The code's environment (made, or the one made before) and, when it needs them,
        its handler processes started: (environment folder, pool folder), ("", "") when its
        handlers run in the workers. 400 with pip's or the import's message, 504 past the
        deadline, 507 past the bound (before any install)."""
        if not build.needs_own_environment(code_dir):
            return "", ""
        try:
            key = build.environment_key(code_dir)  # requirements checked: 400 if not allowed
        except UserCodeError as exc:
            raise MultiModelError(str(exc), 400) from None
        self._check_room()
        env_dir = self.state_dir / ENVIRONMENTS_DIR / key
        with self._locked(env_dir, deadline):  # its pool starts under the lock: never pruned
            environment = self._environment(code_dir, env_dir, deadline)
            if environment.python is None:  # nothing of its own after all (build.prepare)
                return "", ""
            self._check_room()
            pool_dir = self._start(environment, internal_name, env_dir, deadline)
        self._prune()
        return str(env_dir), pool_dir

    def restart(self, env_dir: str, internal_name: str, deadline: float) -> str:
        """New handler processes for a model whose pool is gone; their folder."""
        directory = Path(env_dir)
        with self._locked(directory, deadline):
            environment = _saved(directory)
            if environment is None or environment.python is None:
                raise MultiModelError("The model's environment is gone: load it again", 503)
            return self._start(environment, internal_name, directory, deadline)

    def release(self, pool_dir: str) -> None:
        """Stop a model's handler processes (its environment is kept for a load again)."""
        if pool_dir:
            handler_pool.stop(Path(pool_dir), time.monotonic() + STOP_SECONDS)
            self._record_path(Path(pool_dir)).unlink(missing_ok=True)

    def records(self) -> list[Path]:
        with contextlib.suppress(FileNotFoundError):
            return sorted((self.state_dir / POOLS_DIR).iterdir())
        return []

    def leftovers(self, used: set[str]) -> list[str]:
        """Pools no loaded model uses (their models went with a model server's death), old
        enough not to be a load's in progress."""
        stale = []
        for record in self.records():
            try:
                doc = json.loads(record.read_text())
                age = time.time() - record.stat().st_mtime
            except (OSError, ValueError):
                continue
            if (
                doc.get("pool") not in used
                and age > self.load_timeout_seconds + RECORD_GRACE_SECONDS
            ):
                stale.append(str(doc.get("pool")))
        return stale

    # ----- helpers --------------------------------------------------------------------------

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

    def _environment(self, code_dir: Path, env_dir: Path, deadline: float) -> build.Environment:
        saved = _saved(env_dir)
        if saved is not None:
            (env_dir / ENVIRONMENT_FILE).touch()  # recently used
            log.info("%s: the environment made before (%s)", code_dir, env_dir)
            return saved
        try:
            environment = build.prepare(
                code_dir,
                env_dir,
                self.site,
                max(1.0, deadline - time.monotonic()),
                True,
                self.limits,
            )
        except UserCodeError as exc:
            shutil.rmtree(env_dir, ignore_errors=True)
            status = 504 if isinstance(exc, UserCodeTimeout) else 400
            raise MultiModelError(str(exc), status) from None
        env_dir.mkdir(parents=True, exist_ok=True)
        doc = {**asdict(environment), "code_dir": str(environment.code_dir)}
        (env_dir / ENVIRONMENT_FILE).write_text(json.dumps(doc))
        return environment

    def _start(
        self, environment: build.Environment, internal_name: str, env_dir: Path, deadline: float
    ) -> str:
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
        record.write_text(json.dumps({"pool": str(directory), "environment": str(env_dir)}))
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

    def _prune(self) -> None:
        """Remove the least recently used environments no pool runs on, past max_count."""
        used = set()
        for record in self.records():
            with contextlib.suppress(OSError, ValueError):
                used.add(json.loads(record.read_text()).get("environment"))
        root = self.state_dir / ENVIRONMENTS_DIR
        unused = [
            d
            for d in (root.iterdir() if root.is_dir() else [])
            if d.is_dir() and str(d) not in used
        ]
        unused.sort(key=_last_used, reverse=True)
        for env_dir in unused[self.max_count :]:
            with contextlib.suppress(MultiModelError), self._locked(env_dir, time.monotonic()):
                shutil.rmtree(env_dir, ignore_errors=True)
                log.info("removed the environment %s (not used lately)", env_dir)

    @contextlib.contextmanager
    def _locked(self, env_dir: Path, deadline: float) -> Iterator[None]:
        """The environment's own lock (another load of the same code waits for it)."""
        env_dir.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(env_dir.with_name(env_dir.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise MultiModelError(
                            "Another load of the same code was still preparing it", 504
                        ) from None
                    time.sleep(LOCK_POLL_SECONDS)
            yield
        finally:
            os.close(fd)

    def _record_path(self, directory: Path) -> Path:
        return self.state_dir / POOLS_DIR / directory.name


def _saved(env_dir: Path) -> build.Environment | None:
    """The environment made before in `env_dir`, if it is whole."""
    try:
        doc = json.loads((env_dir / ENVIRONMENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    environment = build.Environment(
        Path(doc["code_dir"]), tuple(doc["paths"]), doc.get("python"), doc.get("reason", "")
    )
    if environment.python is not None and not Path(environment.python).exists():
        return None
    return environment


def _last_used(env_dir: Path) -> float:
    with contextlib.suppress(OSError):
        return (env_dir / ENVIRONMENT_FILE).stat().st_mtime
    return 0.0


def stop_model_pools(state_dir: Path, budget_seconds: float) -> None:
    """serve, at shutdown: stop every handler pool a load started."""
    deadline = time.monotonic() + max(0.5, budget_seconds)
    with contextlib.suppress(FileNotFoundError):
        for record in sorted((state_dir / POOLS_DIR).iterdir()):
            with contextlib.suppress(OSError, ValueError):
                handler_pool.stop(Path(json.loads(record.read_text())["pool"]), deadline)
            record.unlink(missing_ok=True)
