"""Which model versions are loaded: TF Serving's file-system source and manager in one object.

Every poll reads each model's base path, picks the versions its policy aspires to, loads new
ones before unloading old ones (availability preserving), retries failed loads, and keeps the
state of every version it has seen for GetModelStatus. As in TF Serving, the first poll (the
models a server starts with) loads on up to 4 threads per CPU; later polls load and unload on
`--num_load_threads` / `--num_unload_threads` threads (0: one at a time, in the poll's thread).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import gc
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tensorflow_serving.config.model_server_config_pb2 import ModelConfig, ModelType

from tfs_model_server.core.servable import Servable
from tfs_model_server.errors import (
    Code,
    ServingError,
    failed_precondition,
    invalid_argument,
    not_found,
)
from tfs_rest_json.model_version import is_model_version

log = logging.getLogger(__name__)

Loader = Callable[[str, int, Path], Servable]
# Told when versions are gone for good: (model name, their paths, whether the model is gone).
Unloaded = Callable[[str, Sequence[Path], bool], None]

# Models removed from the config whose versions all ended, kept for their status answers
# (END); older ones are forgotten, so a stream of distinct names keeps memory flat.
RETIRED_KEPT = 100

# TF Serving's ServerCore num_initial_load_threads: 4 x the CPUs this process may run on
INITIAL_LOAD_THREADS = 4 * len(os.sched_getaffinity(0))


def run_together(jobs: Sequence[Callable[[], None]], threads: int, name: str) -> None:
    """Run `jobs` on up to `threads` threads and wait for all of them (in this thread, one
    after another, when threads <= 1 or there is one job)."""
    if threads <= 1 or len(jobs) <= 1:
        for job in jobs:
            job()
        return
    with ThreadPoolExecutor(min(threads, len(jobs)), thread_name_prefix=name) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


class State(enum.IntEnum):
    """ModelVersionStatus.State numbers (apis/get_model_status.proto)."""

    UNKNOWN = 0
    START = 10
    LOADING = 20
    AVAILABLE = 30
    UNLOADING = 40
    END = 50


@dataclass
class VersionRecord:
    """One version's lifecycle: state, last error, the loaded servable and its users."""

    version: int
    path: Path
    state: State = State.START
    error: ServingError | None = None
    servable: Servable | None = None
    users: int = 0


class ModelRecord:
    """A configured model and every version seen under its base path."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.versions: dict[int, VersionRecord] = {}
        self.labels: dict[str, int] = {}
        self.base_path_warned = False
        self.forgotten = False  # retired, and its end reported (ModelManager._retire_ended)

    @property
    def name(self) -> str:
        return self.config.name


ASCII_SPACE = " \t\n\v\f\r"
URI_SCHEME = re.compile(r"[A-Za-z][0-9A-Za-z.]*://")  # tensorflow's io::ParseURI


def parse_version(name: str) -> int | None:
    """A directory name's version number, read as absl::SimpleAtoi reads an int64 (ASCII
    digits, optional sign, surrounding whitespace); None when it is not one. Negative numbers
    are not versions here."""
    digits = name.strip(ASCII_SPACE)
    if digits[:1] in ("+", "-"):
        digits = digits[1:]
    if not (digits.isascii() and digits.isdigit()):
        return None
    version = int(name)
    return version if is_model_version(version) else None


def scan_versions(base_path: str) -> dict[int, Path]:
    """Numeric children of base_path (int64, leading zeros allowed); first wins on duplicates."""
    found: dict[int, Path] = {}
    for child in sorted(Path(base_path).iterdir()):
        version = parse_version(child.name)
        if version is None:
            continue
        if version in found:
            log.warning(
                "Duplicate version directories detected: version %d at %s and %s",
                version,
                found[version],
                child,
            )
            continue
        found[version] = child
    return found


def aspired_versions(config: ModelConfig, on_disk: dict[int, Path]) -> dict[int, Path]:
    """The versions the model's version policy asks for, among those on disk."""
    policy = config.model_version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return dict(on_disk)
    if which == "specific":
        return {v: p for v, p in on_disk.items() if v in set(policy.specific.versions)}
    count = policy.latest.num_versions if which == "latest" and policy.latest.num_versions else 1
    return {v: on_disk[v] for v in sorted(on_disk, reverse=True)[:count]}


def is_relative(base_path: str) -> bool:
    """server_core.cc UriIsRelativePath: no URI scheme and not an absolute path."""
    return not base_path.startswith("/") and URI_SCHEME.match(base_path) is None


def model_platform(config: ModelConfig) -> str:
    """The model's platform, from model_platform or the deprecated model_type (server_core.cc
    GetPlatform)."""
    if config.model_type != ModelType.MODEL_TYPE_UNSPECIFIED:
        if config.model_platform:
            raise invalid_argument(
                "Illegal setting both ModelServerConfig::model_type (deprecated) and "
                f"ModelServerConfig::model_platform, model name is {config.name}"
            )
        if config.model_type != ModelType.TENSORFLOW:
            raise invalid_argument(
                f"ModelServerConfig::model_type choice {config.model_type} not supported."
            )
        return "tensorflow"
    if not config.model_platform:
        raise invalid_argument(
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            "ModelServerConfig::model_platform."
        )
    return config.model_platform


def validate_config(configs: Sequence[ModelConfig], previous: Sequence[ModelConfig] = ()) -> None:
    """TF Serving's checks on a model_config_list replacing `previous`, in its order (server_core.cc
    ValidateModelConfigList, ValidateNoModelsChangePlatforms, then each model's platform)."""
    seen: set[str] = set()
    for config in configs:
        if config.name in seen:
            raise invalid_argument(
                f"Illegal to list model {config.name} multiple times in config list"
            )
        seen.add(config.name)
    for config in configs:
        if is_relative(config.base_path):
            raise invalid_argument(
                f"Expected model {config.name} to have an absolute path or URI; got base_path()="
                f"{config.base_path}"
            )
    platforms = {old.name: model_platform(old) for old in previous}
    for config in configs:
        if config.name in platforms and model_platform(config) != platforms[config.name]:
            raise invalid_argument(
                f"Illegal to change a model's platform. For model {config.name} platform was "
                f"{platforms[config.name]} and new platform requested is {model_platform(config)}"
            )
    for config in configs:
        if model_platform(config) != "tensorflow":
            raise invalid_argument(
                f"Model {config.name} has an unsupported model_platform "
                f"{config.model_platform}; only 'tensorflow' is served"
            )


def release_memory() -> None:
    """Give an unloaded model's memory back to the system: collect its reference cycles,
    then have glibc return free heap pages (its large tensors are on the heap once the
    dynamic mmap threshold has grown, and would otherwise stay in the process)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class ModelManager:
    """Loads, serves and unloads model versions according to a model_config_list."""

    def __init__(
        self,
        loader: Loader,
        *,
        poll_wait_seconds: float = 1.0,
        max_load_retries: int = 5,
        load_retry_interval_s: float = 60.0,
        allow_labels_for_unavailable: bool = False,
        load_threads: int = 0,
        unload_threads: int = 0,
        initial_load_threads: int = INITIAL_LOAD_THREADS,
        on_unloaded: Unloaded | None = None,
    ) -> None:
        self._loader = loader
        self._on_unloaded = on_unloaded
        self._load_threads = load_threads
        self._unload_threads = unload_threads
        self._initial_load_threads = initial_load_threads
        self._polled = False  # the first poll loads on initial_load_threads
        self._poll_wait = poll_wait_seconds
        self._max_retries = max(0, max_load_retries)
        self._retry_interval = load_retry_interval_s
        self._allow_unavailable_labels = allow_labels_for_unavailable
        self._models: dict[str, ModelRecord] = {}
        self._retired: dict[str, ModelRecord] = {}
        self._lock = threading.Condition()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----- configuration -------------------------------------------------------------
    def set_config(self, configs: Sequence[ModelConfig]) -> None:
        """Replace the served models once the config passes TF Serving's checks: new ones are
        added, absent ones unloaded."""
        with self._lock:
            old = self._models
        validate_config(configs, [record.config for record in old.values()])
        with self._lock:
            fresh: dict[str, ModelRecord] = {}
            for config in configs:
                record = old.get(config.name) or self._retired.pop(config.name, None)
                if record is None:
                    record = ModelRecord(config)
                record.config = config
                record.forgotten = False
                fresh[config.name] = record
            for name, record in old.items():
                if name not in fresh:
                    self._retired[name] = record
            self._models = fresh
        self.poll()

    def apply_labels(self, configs: Sequence[ModelConfig]) -> None:
        """Set version labels, all or none (server_core.cc UpdateModelVersionLabelMap): a label
        may only name an AVAILABLE version, or, when allowed, any version unless it already
        names another one."""
        with self._lock:
            labelled: list[tuple[ModelRecord, dict[str, int]]] = []
            for config in configs:
                record = self._models.get(config.name)
                if record is None:
                    continue
                labels = dict(config.version_labels)
                for label, version in labels.items():
                    rec = record.versions.get(version)
                    available = rec is not None and rec.state is State.AVAILABLE
                    moved = record.labels.get(label, version) != version
                    if not available and not (self._allow_unavailable_labels and not moved):
                        raise failed_precondition(
                            f"Request to assign label to version {version} of model "
                            f"{config.name}, which is not currently available for inference"
                        )
                labelled.append((record, labels))
            for record, labels in labelled:
                record.labels = labels

    def start_polling(self) -> None:
        """Poll base paths every poll_wait_seconds in the background (if > 0)."""
        if self._poll_wait <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._poll_loop, name="tfs-fs-poller", daemon=True)
        self._thread.start()

    def _poll_loop(self) -> None:
        while not self._stop.wait(self._poll_wait):
            try:
                self.poll()
            except Exception:  # a poll failure must not kill the poller
                log.exception("file system poll failed")

    # ----- the poll: load and unload -------------------------------------------------
    def poll(self) -> None:
        """One pass over every model (and retired ones): load aspired versions, unload the rest."""
        with self._poll_lock:
            with self._lock:
                models = list(self._models.values())
                retired = list(self._retired.values())
            load_threads = self._load_threads if self._polled else self._initial_load_threads
            self._polled = True
            plans = [(record, self._aspired(record)) for record in models]
            plans += [(record, {}) for record in retired]  # removed from the config: unload
            changes = [(record, aspired) for record, aspired in plans if aspired is not None]
            if load_threads <= 1 and self._unload_threads <= 1:
                for record, aspired in changes:  # one action at a time, model by model
                    self._reconcile(record, aspired)
                self._retire_ended()
                return
            loads = [
                functools.partial(self._load, record.name, rec)
                for record, aspired in changes
                for rec in self._to_load(record, aspired)
            ]
            run_together(loads, load_threads, "tfs-load")
            unloads = [
                functools.partial(self._unload, record.name, rec)
                for record, aspired in changes
                for rec in self._to_unload(record, aspired)
            ]
            run_together(unloads, self._unload_threads, "tfs-unload")
            self._retire_ended()

    def has_model(self, name: str) -> bool:
        """Whether `name` is in the current config (loaded or not)."""
        return name in self._models

    def _retire_ended(self) -> None:
        """Models removed from the config whose versions all ended: reported once
        (on_unloaded), and all but the RETIRED_KEPT most recent forgotten."""
        with self._lock:
            ended = [
                record
                for record in self._retired.values()
                if not record.forgotten
                and all(rec.state is State.END for rec in record.versions.values())
            ]
            for record in ended:
                record.forgotten = True
            for name in [name for name, record in self._retired.items() if record.forgotten][
                : max(0, len(self._retired) - RETIRED_KEPT)
            ]:
                del self._retired[name]
        for record in ended:
            paths = [rec.path for rec in record.versions.values()]
            self._report_unloaded(record.name, paths, model_gone=True)

    def _report_unloaded(self, name: str, paths: Sequence[Path], model_gone: bool) -> None:
        """on_unloaded with the paths no other version still uses (models may share one)."""
        if self._on_unloaded is not None:
            with self._lock:
                records = [*self._models.values(), *self._retired.values()]
                in_use = {
                    rec.path
                    for record in records
                    for rec in record.versions.values()
                    if rec.state is not State.END
                }
            try:
                self._on_unloaded(name, [path for path in paths if path not in in_use], model_gone)
            except Exception:  # a report must never stop an unload
                log.exception("reporting the unload of %s failed", name)

    def _aspired(self, record: ModelRecord) -> dict[int, Path] | None:
        base = record.config.base_path
        try:
            on_disk = scan_versions(base)
        except FileNotFoundError:
            log.error(
                "File system access error: Could not find base path %s for servable %s",
                base,
                record.name,
            )
            return None
        except OSError as exc:
            log.error("File system access error for servable %s: %s", record.name, exc)
            return None
        if not on_disk and not record.base_path_warned:
            log.warning(
                "No versions of servable %s found under base path %s. Did you forget to name "
                "your leaf directory as a number (eg. '/1/')?",
                record.name,
                base,
            )
            record.base_path_warned = True
        return aspired_versions(record.config, on_disk)

    def _reconcile(self, record: ModelRecord, aspired: dict[int, Path]) -> None:
        """Load the aspired versions, then unload the others, one at a time in this thread."""
        for rec in self._to_load(record, aspired):
            self._load(record.name, rec)
        for rec in self._to_unload(record, aspired):
            self._unload(record.name, rec)

    def _to_load(self, record: ModelRecord, aspired: dict[int, Path]) -> list[VersionRecord]:
        """The aspired versions not loaded or loading (a failed one waits until it leaves and
        comes back), each in state START."""
        starting = []
        with self._lock:
            for version in sorted(aspired):
                rec = record.versions.get(version)
                if rec is not None and rec.state in (State.AVAILABLE, State.LOADING):
                    continue
                if rec is not None and rec.state is State.END and rec.error is not None:
                    continue
                rec = VersionRecord(version=version, path=aspired[version], state=State.START)
                record.versions[version] = rec
                starting.append(rec)
        return starting

    def _to_unload(self, record: ModelRecord, aspired: dict[int, Path]) -> list[VersionRecord]:
        """The available versions no longer aspired; failed ones no longer aspired are forgotten."""
        leaving = []
        with self._lock:
            for version, rec in sorted(record.versions.items()):
                if version in aspired:
                    continue
                if rec.state is State.AVAILABLE:
                    leaving.append(rec)
                elif rec.state is State.END and rec.error is not None:
                    del record.versions[version]
        return leaving

    def _load(self, name: str, rec: VersionRecord) -> None:
        with self._lock:
            rec.state = State.LOADING
            self._lock.notify_all()
        log.info(
            "Loading servable version {name: %s version: %d} from %s", name, rec.version, rec.path
        )
        error: ServingError | None = None
        for attempt in range(self._max_retries + 1):
            if attempt:
                log.info(
                    "Retrying load of servable version {name: %s version: %d} (%d of %d)",
                    name,
                    rec.version,
                    attempt,
                    self._max_retries,
                )
                if self._stop.wait(self._retry_interval):
                    break
            try:
                servable = self._loader(name, rec.version, rec.path)
            except ServingError as exc:
                error = exc
            except Exception as exc:
                error = ServingError(Code.UNKNOWN, f"{type(exc).__name__}: {exc}")
            else:
                with self._lock:
                    rec.servable, rec.state, rec.error = servable, State.AVAILABLE, None
                    self._lock.notify_all()
                log.info(
                    "Successfully loaded servable version {name: %s version: %d}", name, rec.version
                )
                return
            log.error(
                "Loading servable: {name: %s version: %d} failed: %s",
                name,
                rec.version,
                error.message,
            )
        with self._lock:
            rec.state, rec.error = State.END, error
            self._lock.notify_all()

    def _unload(self, name: str, rec: VersionRecord, deadline_s: float = 60.0) -> None:
        with self._lock:
            rec.state = State.UNLOADING
            end = time.monotonic() + deadline_s
            while rec.users > 0 and time.monotonic() < end:
                self._lock.wait(0.1)
            servable, rec.servable = rec.servable, None
        if servable is not None:
            servable.close()
            del servable
            release_memory()
        with self._lock:
            rec.state, rec.error = State.END, None
            self._lock.notify_all()
        log.info("Unloaded servable version {name: %s version: %d}", name, rec.version)
        self._report_unloaded(name, [rec.path], model_gone=False)

    # ----- waiting --------------------------------------------------------------------
    def wait_until_available(
        self, names: Sequence[str], timeout_s: float | None = None
    ) -> list[str]:
        """Block until every aspired version of each model is AVAILABLE or failed.

        Returns the error texts of the models that did not become available; a model with no
        versions on disk keeps the wait going (as TF Serving does) until timeout_s.
        """
        end = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while True:
                pending, errors = [], []
                for name in names:
                    record = self._models.get(name)
                    if record is None:
                        errors.append(f"{name}: not configured")
                        continue
                    states = [
                        r
                        for r in record.versions.values()
                        if r.state is not State.END or r.error is not None
                    ]
                    failed = [(r.version, r.error) for r in states if r.error is not None]
                    if failed:
                        errors.extend(
                            f"{{name: {name} version: {version}}}: {error.message}"
                            for version, error in failed
                        )
                    elif not any(r.state is State.AVAILABLE for r in states) or any(
                        r.state in (State.START, State.LOADING) for r in states
                    ):
                        pending.append(name)
                if not pending or self._stop.is_set():
                    return errors
                if end is not None and time.monotonic() >= end:
                    return errors + [f"{n}: timed out waiting to become available" for n in pending]
                self._lock.wait(0.2 if end is None else max(0.0, min(0.2, end - time.monotonic())))
                if self._poll_wait <= 0 or self._thread is None:
                    self._lock.release()
                    try:
                        self.poll()
                    finally:
                        self._lock.acquire()

    # ----- serving ----------------------------------------------------------------------
    def _resolve(self, name: str, version: int | None, label: str | None) -> VersionRecord:
        """The version a request means (label, specific, or latest available)."""
        record = self._models.get(name)
        if label:
            if record is None or label not in record.labels:
                raise invalid_argument(f"Unrecognized servable version label: {label}")
            version = record.labels[label]
        if version is not None:
            rec = record.versions.get(version) if record else None
            if rec is None or rec.state is not State.AVAILABLE:
                raise not_found(f"Servable not found for request: Specific({name}, {version})")
            return rec
        available = [
            r for r in (record.versions.values() if record else ()) if r.state is State.AVAILABLE
        ]
        if not available:
            raise not_found(f"Servable not found for request: Latest({name})")
        return max(available, key=lambda r: r.version)

    @contextlib.contextmanager
    def servable(
        self, name: str, version: int | None = None, label: str | None = None
    ) -> Iterator[Servable]:
        """Hold a loaded version for the duration of one request."""
        with self._lock:
            rec = self._resolve(name, version, label)
            rec.users += 1
            servable = rec.servable
        try:
            assert servable is not None
            yield servable
        finally:
            with self._lock:
                rec.users -= 1
                if rec.users == 0:
                    self._lock.notify_all()

    def version_states(
        self, name: str, version: int | None = None
    ) -> list[tuple[int, State, ServingError | None]]:
        """(version, state, error) for GetModelStatus, latest version first. As in TF
        Serving's GetModelStatusImpl, a given version is looked up directly (its error names
        the version even for an unknown model), and version labels play no part."""
        with self._lock:
            record = self._models.get(name) or self._retired.get(name)
            if version is not None:
                rec = record.versions.get(version) if record is not None else None
                if rec is None:
                    raise not_found(f"Could not find version {version} of model {name}")
                return [(rec.version, rec.state, rec.error)]
            if record is None or not record.versions:
                raise not_found(f"Could not find any versions of model {name}")
            return [
                (r.version, r.state, r.error)
                for r in sorted(record.versions.values(), key=lambda r: -r.version)
            ]

    def close(self) -> None:
        """Stop polling and unload everything."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            records = list(self._models.values()) + list(self._retired.values())
        for record in records:
            for rec in list(record.versions.values()):
                if rec.state is State.AVAILABLE:
                    self._unload(record.name, rec, deadline_s=5.0)
