"""Multi-model models whose code/ brings packages of its own: an environment and a pool of
handler processes each (environments/), made at load, ended at unload.

A model whose code/ holds only inference.py runs in the service's workers, beside every other
such model. One with a requirements.txt, a lib/ or modules beside inference.py gets its own
environment (two models may pin different versions of one package) and its own handler
processes, at most SAGEMAKER_MME_MAX_ENVIRONMENTS at once (507 past it, or when memory is
short), refused before anything is installed: a load takes a slot first (`reserved/`, a file
it holds locked while it prepares, so a crashed loader's slot is free again), counted with the
pools that run.

Environments are kept after an unload, by what they are made of (build.environment_key): a
model loaded again starts its processes on the environment made before, without pip. The
least recently used ones that no model uses go past SAGEMAKER_MME_MAX_ENVIRONMENTS of them. A
load that fails removes the environment it made (`abandon`), not one made before.
Each running pool is recorded in the state directory (`pools/`), so any worker can stop or
restart it and serve stops them all at shutdown.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path

from process_utils.exit_reason import free_memory_bytes
from process_utils.files import locked
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments import build
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.user_code.loading import UserCodeError, UserCodeTimeout

log = logging.getLogger(__name__)

POOLS_DIR = "pools"
RESERVED_DIR = "reserved"
ENVIRONMENTS_DIR = "environments"
ENVIRONMENT_FILE = "environment.json"
ROOM_LOCK_SECONDS = 10.0  # the slots' lock is held only to count them
STOP_SECONDS = 5.0
RECORD_GRACE_SECONDS = 60.0  # a pool no model lists is a leftover only once this much older
# than a load can take (a load in progress has one too)


class ModelEnvironments:
    """Environments and handler pools of the models that need their own, as `config` bounds
    them (SAGEMAKER_MME_MAX_ENVIRONMENTS, processes per pool, pip's bounds, ...)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.state_dir = Path(config.state_dir)
        self.limits = build.InstallLimits(config.pip_max_memory_mb, config.environment_max_disk_mb)
        # pool folders go in the service's private folder, which serve's watchdog removes
        # once serve is gone however it ended (a pool's own clean-up races its SIGKILL)
        self.pools_dir = Path(config.socket_path).parent if config.socket_path else None

    def prepare(self, code_dir: Path, internal_name: str, deadline: float) -> tuple[str, str]:
        """The code's environment (made, or the one made before) and, when it needs them,
        its handler processes started: (environment folder, pool folder), ("", "") when its
        handlers run in the workers. 400 for requirements that are not allowed, with pip's
        or the import's message, or the bound pip went past; 504 past the deadline; 507 past
        the bound of environments (before any install). A failure leaves no environment
        that this load made."""
        if not build.needs_own_environment(code_dir):
            return "", ""
        try:
            key = build.environment_key(code_dir)  # requirements checked: 400 if not allowed
        except UserCodeError as exc:
            raise MultiModelError(str(exc), 400) from None
        env_dir = self.state_dir / ENVIRONMENTS_DIR / key
        with self._slot(deadline) as pool_dir, self._locked(env_dir, deadline):
            # its pool starts under the environment's lock: never pruned meanwhile
            environment, made = self._environment(code_dir, env_dir, deadline, pool_dir.name)
            if environment.python is None:  # nothing of its own after all (build.prepare)
                if made:
                    shutil.rmtree(env_dir, ignore_errors=True)
                return "", ""
            if not build.has_handlers(code_dir):  # no handlers to run there
                return str(env_dir), ""
            try:
                self._start(environment, internal_name, env_dir, pool_dir, deadline)
            except BaseException:
                if made:
                    shutil.rmtree(env_dir, ignore_errors=True)
                raise
        self._prune()
        return str(env_dir), str(pool_dir)

    def abandon(self, env_dir: str, pool_dir: str) -> None:
        """After a load that failed once its pool ran: the pool stopped, and the environment
        removed if that load made it (one made before is kept for a load again)."""
        self.release(pool_dir)
        if not env_dir or not pool_dir:
            return
        directory = Path(env_dir)
        with contextlib.suppress(MultiModelError), self._locked(directory, time.monotonic() + 5):
            made_by = _doc(directory).get("made_by")
            if made_by == Path(pool_dir).name and str(directory) not in self._used():
                shutil.rmtree(directory, ignore_errors=True)
                log.info("removed the environment %s (its load failed)", directory)

    def restart(self, env_dir: str, internal_name: str, deadline: float) -> str:
        """New handler processes for a model whose pool is gone; their folder. An environment
        that changed since it was made is made again first."""
        directory = Path(env_dir)
        with self._locked(directory, deadline):
            code_dir = _doc(directory).get("code_dir")
            pool_dir = handler_pool.new_pool_dir(self.pools_dir)
            try:
                environment = _saved(directory)
                if environment is None and code_dir:
                    environment, _ = self._environment(
                        Path(code_dir), directory, deadline, pool_dir.name
                    )
                if environment is None or environment.python is None:
                    raise MultiModelError("The model's environment is gone: load it again", 503)
                self._start(environment, internal_name, directory, pool_dir, deadline)
            except BaseException:
                shutil.rmtree(pool_dir, ignore_errors=True)
                raise
            return str(pool_dir)

    def release(self, pool_dir: str) -> None:
        """Stop a model's handler processes (its environment is kept for a load again)."""
        if pool_dir:
            handler_pool.stop(Path(pool_dir), time.monotonic() + STOP_SECONDS)
            self._record_path(Path(pool_dir)).unlink(missing_ok=True)

    def leftovers(self, used: set[str], crashed: set[str]) -> list[str]:
        """Pools no loaded model uses: those of models a model server's death unloaded
        (`crashed`), and any other old enough not to be a load's in progress."""
        oldest = time.time() - self.config.load_timeout_seconds - RECORD_GRACE_SECONDS
        return [
            doc["pool"]
            for doc in _documents(self.state_dir)
            if doc["pool"] not in used and (doc["pool"] in crashed or doc["written"] < oldest)
        ]

    # ----- helpers --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _slot(self, deadline: float) -> Iterator[Path]:
        """A folder for the load's pool, counted against max_count from now (its record counts
        once the pool runs) until the load's preparation ends; 507 past the bound or when
        memory is short, before anything is installed."""
        reserved = self.state_dir / RESERVED_DIR
        reserved.mkdir(parents=True, exist_ok=True)
        room = min(deadline, time.monotonic() + ROOM_LOCK_SECONDS)
        with self._locked(reserved, room, "Other loads held the count of environments"):
            taken = {record.name for record in _records(self.state_dir)} | _held(reserved)
            if len(taken) >= self.config.max_environments:
                raise MultiModelError(
                    f"{len(taken)} models with an environment of their own are loaded or "
                    f"loading, the most allowed (SAGEMAKER_MME_MAX_ENVIRONMENTS="
                    f"{self.config.max_environments}): unload one first",
                    507,
                )
            if free_memory_bytes() < self.config.memory_reserve_bytes:
                raise MultiModelError(
                    "Not enough memory to start the model's handler processes (less than "
                    f"SAGEMAKER_MME_MEMORY_RESERVE_MB={self.config.memory_reserve_bytes >> 20} "
                    "free)",
                    507,
                )
            pool_dir = handler_pool.new_pool_dir(self.pools_dir)
            slot = reserved / pool_dir.name
            fd = os.open(slot, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else holds it
        try:
            yield pool_dir
        finally:
            if not self._record_path(pool_dir).exists():  # no pool runs there
                shutil.rmtree(pool_dir, ignore_errors=True)
            slot.unlink(missing_ok=True)
            os.close(fd)

    def _environment(
        self, code_dir: Path, env_dir: Path, deadline: float, made_by: str
    ) -> tuple[build.Environment, bool]:
        """The environment made before, or a new one (marked as made by the load whose pool
        folder is `made_by`); and whether this load made it."""
        saved = _saved(env_dir)
        if saved is not None:
            (env_dir / ENVIRONMENT_FILE).touch()  # recently used
            log.info("%s: the environment made before (%s)", code_dir, env_dir)
            return saved, False
        try:
            environment = build.prepare(
                code_dir,
                env_dir,
                Path(self.config.container_site),
                max(1.0, deadline - time.monotonic()),
                True,
                self.limits,
            )
        except UserCodeError as exc:
            shutil.rmtree(env_dir, ignore_errors=True)
            status = 504 if isinstance(exc, UserCodeTimeout) else 400
            raise MultiModelError(str(exc), status) from None
        env_dir.mkdir(parents=True, exist_ok=True)
        doc = {
            **asdict(environment),
            "code_dir": str(environment.code_dir),
            "made_by": made_by,
            "seal": _seal(env_dir),  # what it holds now: a change later is seen (_saved)
        }
        (env_dir / ENVIRONMENT_FILE).write_text(json.dumps(doc))
        return environment, True

    def _start(
        self,
        environment: build.Environment,
        internal_name: str,
        env_dir: Path,
        directory: Path,
        deadline: float,
    ) -> None:
        """The environment's handler processes, started in `directory` and recorded."""
        spec = handler_pool.PoolSpec(
            directory,
            str(environment.python),
            environment.code_dir,
            environment.paths,
            module=f"inference_{internal_name}",
            processes=self.config.handler_processes,
            log_format=self.config.log_format,
        )
        record = self._record_path(directory)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"pool": str(directory), "environment": str(env_dir)}))
        started = time.monotonic()
        try:
            handler_pool.start_detached(spec, self.config.lifeline_fd, deadline)
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

    def _prune(self) -> None:
        """Remove the least recently used environments no pool runs on, past max_count."""
        used = self._used()
        root = self.state_dir / ENVIRONMENTS_DIR
        unused = [
            d
            for d in (root.iterdir() if root.is_dir() else [])
            if d.is_dir() and str(d) not in used
        ]
        unused.sort(key=_last_used, reverse=True)
        for env_dir in unused[self.config.max_environments :]:
            with contextlib.suppress(MultiModelError), self._locked(env_dir, time.monotonic()):
                shutil.rmtree(env_dir, ignore_errors=True)
                log.info("removed the environment %s (not used lately)", env_dir)

    def _locked(
        self,
        env_dir: Path,
        deadline: float,
        busy: str = "Another load of the same code was still preparing it",
    ) -> AbstractContextManager[None]:
        """The environment's own lock (another load of the same code waits for it; 504 with
        `busy` past the deadline); also the slots' (`RESERVED_DIR`)."""
        env_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = env_dir.with_name(env_dir.name + ".lock")
        return locked(lock, deadline, MultiModelError(busy, 504))

    def _record_path(self, directory: Path) -> Path:
        return self.state_dir / POOLS_DIR / directory.name

    def _used(self) -> set[str]:
        """The environments running pools use."""
        return {doc["environment"] for doc in _documents(self.state_dir)}


def _records(state_dir: Path) -> list[Path]:
    """The records of the pools that run (or are starting)."""
    with contextlib.suppress(FileNotFoundError):
        return sorted((state_dir / POOLS_DIR).iterdir())
    return []


def _documents(state_dir: Path) -> list[dict]:
    """What the records say: each pool's folder (`pool`), its `environment`, and when the
    record was `written` (one being written or removed meanwhile is left out)."""
    documents = []
    for record in _records(state_dir):
        with contextlib.suppress(OSError, ValueError):
            documents.append({**json.loads(record.read_text()), "written": record.stat().st_mtime})
    return documents


def _held(directory: Path) -> set[str]:
    """The slots in `directory` whose loads are still preparing (their files locked); a slot
    whose loader is gone (crashed) is removed."""
    held = set()
    for slot in directory.iterdir():
        try:
            fd = os.open(slot, os.O_RDWR)
        except OSError:
            continue  # just released
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.add(slot.name)
        else:
            slot.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return held


def _doc(env_dir: Path) -> dict:
    try:
        doc = json.loads((env_dir / ENVIRONMENT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _saved(env_dir: Path) -> build.Environment | None:
    """The environment made before in `env_dir`, if it is whole and holds what it held when
    it was made (else it is removed, to be made again: code that ran in it may have left
    something every interpreter runs at start there, such as a .pth file)."""
    doc = _doc(env_dir)
    if not doc:
        return None
    environment = build.Environment(
        Path(doc["code_dir"]), tuple(doc["paths"]), doc.get("python"), doc.get("reason", "")
    )
    if environment.python is not None and not Path(environment.python).exists():
        return None
    if _seal(env_dir) != doc.get("seal"):
        log.warning(
            "the environment %s changed since it was made (files added, removed or changed): "
            "it is made again",
            env_dir,
        )
        shutil.rmtree(env_dir, ignore_errors=True)
        return None
    return environment


def _seal(env_dir: Path) -> str:
    """A digest of what an environment runs, to tell whether it changed since it was made
    (code that ran in it may have left a .pth file that every later interpreter runs): every
    file and link of its venv and of its links to the container's packages (path, size, mode,
    mtime; not environment.json, touched as it is used), bytecode caches aside (the
    interpreter writes them as it imports)."""
    digest = hashlib.sha256()
    for root in (env_dir / "venv", env_dir / "linked"):
        for directory, folders, files in os.walk(root):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            links = (f for f in folders if os.path.islink(os.path.join(directory, f)))
            for name in sorted([*files, *links]):
                path = Path(directory, name)
                with contextlib.suppress(OSError):
                    info = path.lstat()
                    digest.update(
                        b"%s\0%d\0%o\0%d\n"
                        % (
                            os.fsencode(path.relative_to(env_dir)),
                            info.st_size,
                            info.st_mode,
                            info.st_mtime_ns,
                        )
                    )
    return digest.hexdigest()


def _last_used(env_dir: Path) -> float:
    with contextlib.suppress(OSError):
        return (env_dir / ENVIRONMENT_FILE).stat().st_mtime
    return 0.0


def stop_model_pools(state_dir: Path, budget_seconds: float) -> None:
    """serve, at shutdown: stop every handler pool a load started."""
    deadline = time.monotonic() + max(0.5, budget_seconds)
    for doc in _documents(state_dir):
        handler_pool.stop(Path(doc["pool"]), deadline)
    shutil.rmtree(state_dir / POOLS_DIR, ignore_errors=True)
