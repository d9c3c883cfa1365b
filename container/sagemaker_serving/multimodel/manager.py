"""Multi-model endpoints: load, list, get and unload models on the running model servers.

What is loaded lives in the registry (registry.py). A load or unload sends the whole new
model list to every model server instance (HandleReloadConfigRequest) and answers once the
versions are AVAILABLE, or gone; a failed or timed-out load is taken back out of every
instance before the error is answered.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from process_utils.exit_reason import free_memory_bytes
from sagemaker_serving.config.model_discovery import Model, find_model
from sagemaker_serving.config.tfs_config import model_server_config
from sagemaker_serving.errors import StatusError
from sagemaker_serving.multimodel.errors import (
    MultiModelError,
    already_loaded,
    as_multi_model_error,
    no_base_path,
    not_loaded,
)
from sagemaker_serving.multimodel.registry import LoadedModel, Registry, internal_name
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.tfs_client.errors import ModelServerError
from sagemaker_serving.tfs_client.health import all_available

log = logging.getLogger(__name__)

MEMORY_FACTOR = 2.0  # loaded size / size on disk, a rough upper bound for SavedModels
MAX_NAME_LENGTH = 1024
ROLLBACK_SECONDS = 30.0  # per instance, to take a failed load back out
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # the status code of a load short of memory: 507
POLL_SECONDS = 0.05  # between model status requests while a load or unload goes on
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


@dataclass
class MultiModelManager:
    """The /models API over the registry and the model server instances."""

    registry: Registry
    client: ModelServerClient
    model_root: Path
    load_timeout_seconds: float
    memory_reserve_bytes: int
    _seen: tuple[str, str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.model_root = self.model_root.resolve()

    # ----- reads (no lock: the file is replaced atomically) ----------------------------------
    def get(self, name: str) -> LoadedModel:
        model = self.current().get(name)
        if model is None:
            raise not_loaded(name)
        return model

    def page(self, limit: int, token: str | None) -> tuple[list[LoadedModel], str | None]:
        """Models sorted by name from `token` (an offset), at most `limit`; the next token."""
        start = 0
        if token:
            if not token.isdigit():
                raise MultiModelError(f"Invalid next_page_token: {token!r}", 400)
            start = int(token)
        models = sorted(self.current().values(), key=lambda m: m.name)
        chunk = models[start : start + limit]
        more = start + limit < len(models)
        return chunk, str(start + limit) if more else None

    def current(self) -> dict[str, LoadedModel]:
        """The loaded models; when the list changed since this process last looked (a load
        or unload in any worker, a model server's death), what the client cached about the
        models is dropped first."""
        models, generation, written = self.registry.snapshot()
        stamp = (written, generation)
        if stamp != self._seen:
            self.client.clear()
            self._seen = stamp
        return models

    # ----- changes (under the lock) -----------------------------------------------------------
    def load(
        self,
        name: str,
        url: str,
        prepare: Callable[[LoadedModel, float], LoadedModel] | None = None,
        release: Callable[[LoadedModel], None] | None = None,
        deadline: float | None = None,
    ) -> LoadedModel:
        """Load `name` from `url` on every instance; listed only once all is done. `prepare`
        (its code's environment and handler processes: code.py) runs first, with the load's
        deadline (`deadline`, default load_timeout_seconds from now) but before the lock, so
        a long pip install or import holds up no other load or unload; `release` ends what
        it made when the load fails after it. While it runs, another load of `name` is a 409.
        A load that fails or runs past its deadline is taken back out of every instance: it
        leaves no trace."""
        check_name(name)
        base = self._model_url(url, name)
        if deadline is None:
            deadline = time.monotonic() + self.load_timeout_seconds
        with self.registry.loading(name):
            if name in self.current():
                raise already_loaded(name)
            try:  # Python 3.11's os.walk recurses: a folder per level
                found = find_model(base, internal_name(name))
                if found is None:
                    log.warning("load of %s: no SavedModel version under %s", name, url)
                    raise no_base_path(url, name)
                self._check_inside(base, url)  # the versions found under it included
            except RecursionError:
                raise MultiModelError(f"url {url}: its folders nest too deep", 400) from None
            self._check_memory(name, found)
            model = LoadedModel(name, str(base), found.name, str(found.base_path), found.versions)
            if prepare is not None:
                model = prepare(model, deadline)
            try:
                self._add(model, deadline)
            except BaseException:
                if release is not None:
                    release(model)
                raise
        log.info("loaded model %s from %s as %s %s", name, url, model.internal_name, model.versions)
        return model

    def _add(self, model: LoadedModel, deadline: float) -> None:
        """`model` on every instance, then listed; taken back out of every one if it fails."""
        with self.registry.locked():
            models, generation, _ = self.registry.snapshot()
            if model.name in models:  # another load of the name won while this one prepared
                raise already_loaded(model.name)
            self.client.forget(model.internal_name)
            try:
                self._apply([*models.values(), model], deadline, loading=model)
                self._wait(model, deadline, available=True)
                self.registry.write({**models, model.name: model}, generation)
            except Exception as exc:
                error = _load_error(model.name, exc)
                log.warning("loading %s failed: %s; taking it back out", model.name, error.message)
                self._take_back(list(models.values()))
                raise error from None

    def unload(self, name: str, release: Callable[[LoadedModel], None] | None = None) -> None:
        """Unload `name` from every instance; `release` then ends what its `prepare` made."""
        with self.registry.locked():
            models, generation, _ = self.registry.snapshot()
            model = models.pop(name, None)
            if model is None:
                raise not_loaded(name)
            deadline = time.monotonic() + self.load_timeout_seconds
            self.registry.write(models, generation)  # invocations see it gone from now on
            self.client.forget(model.internal_name)
            try:
                self._apply(list(models.values()), deadline)
                self._wait(model, deadline, available=False)
            except ModelServerError as exc:
                raise as_multi_model_error(f"Unloading model {name}", exc) from None
            finally:
                if release is not None:
                    release(model)
        log.info("unloaded model %s (%s)", name, model.internal_name)

    # ----- helpers -----------------------------------------------------------------------------
    def _model_url(self, url: str, name: str) -> Path:
        if not isinstance(url, str) or not url or "\x00" in url:
            raise MultiModelError("url must be a non-empty path", 400)
        if not _utf8(url):
            raise MultiModelError("url must be valid Unicode (no lone surrogates)", 400)
        path = Path(url)
        if not path.is_absolute():
            path = self.model_root / path
        try:
            resolved = path.resolve()
            inside = self._inside(resolved)
            is_dir = inside and resolved.is_dir()
        except (OSError, ValueError) as exc:  # e.g. a name over 255 bytes
            reason = getattr(exc, "strerror", None) or str(exc)
            raise MultiModelError(f"url {url} is not a usable path: {reason}", 400) from None
        if not inside:
            raise MultiModelError(f"url {url} is outside the model directory", 400)
        if not is_dir:
            log.warning("load: %s is not a directory", url)
            raise no_base_path(url, name)
        return resolved

    def _inside(self, path: Path) -> bool:
        return path == self.model_root or self.model_root in path.parents

    def _check_inside(self, top: Path, url: str) -> None:
        """400 when anything the model server or the model's code would read under `top`
        (links followed: versions, their files, code/) leads outside the model directory."""
        seen = {top.resolve()}
        for directory, dirs, files in os.walk(top, followlinks=True):  # unreadable: skipped
            real = {name: Path(os.path.realpath(Path(directory, name))) for name in dirs + files}
            for name, target in real.items():
                if not self._inside(target):
                    path = Path(directory, name)
                    log.warning("load from %s refused: %s leads to %s", url, path, target)
                    raise MultiModelError(
                        f"url {url}: {path.relative_to(top)} links to a path outside the model "
                        "directory",
                        400,
                    )
            kept = [name for name in dirs if real[name] not in seen]
            seen.update(real[name] for name in kept)
            dirs[:] = kept

    def _check_memory(self, name: str, model: Model) -> None:
        size = sum(
            f.stat().st_size
            for version in model.versions
            for f in (model.base_path / str(version)).rglob("*")
            if f.is_file()
        )
        needed = int(size * MEMORY_FACTOR)
        available = free_memory_bytes() - self.memory_reserve_bytes
        if needed > available:
            raise MultiModelError(
                f"Not enough memory to load model {name}: it needs about {-(-needed >> 20)} MiB "
                f"and {max(0, available) >> 20} MiB are free beyond "
                f"SAGEMAKER_MME_MEMORY_RESERVE_MB={self.memory_reserve_bytes >> 20}",
                507,
            )

    def _apply(
        self, models: Sequence[LoadedModel], deadline: float, loading: LoadedModel | None = None
    ) -> None:
        """Send the model list to every model server instance (each waits for its loads)."""
        config = _config(models)
        for index in range(len(self.client.grpc_ports)):
            self._apply_to(index, config, deadline, loading)

    def _take_back(self, models: Sequence[LoadedModel]) -> None:
        """After a failed load: every instance gets the list without it, each within its own
        deadline (one that does not answer is logged; it cannot hold up the others)."""
        config = _config(models)
        for index in range(len(self.client.grpc_ports)):
            try:
                self._apply_to(index, config, time.monotonic() + ROLLBACK_SECONDS)
            except MultiModelError as exc:
                log.error("model server %d did not take the model back out: %s", index, exc)

    def _apply_to(
        self, index: int, config: bytes, deadline: float, loading: LoadedModel | None = None
    ) -> None:
        """The list on instance `index`; when it refuses, 507 if the load of `loading` failed
        for lack of memory or another resource (RESOURCE_EXHAUSTED, the code the model server
        carries for the refusal or for the model's failed versions), else 500."""
        try:
            refused = self.client.grpc.reload_config(index, config, deadline)
        except ModelServerError as exc:
            raise as_multi_model_error("The model server did not apply the models", exc) from None
        if refused is not None:
            codes = {refused.code}
            if loading is not None:
                codes |= self._failure_codes(index, loading, deadline)
            status = 507 if RESOURCE_EXHAUSTED in codes else 500
            raise MultiModelError(f"The model server could not load the model: {refused}", status)

    def _failure_codes(self, index: int, model: LoadedModel, deadline: float) -> set[str]:
        """Why `model`'s versions failed on instance `index` (TF Serving aggregates a reload's
        failures under UNKNOWN; each version's status keeps its own code)."""
        try:
            return self.client.rest.version_error_codes(index, model.internal_name, deadline)
        except ModelServerError as exc:
            log.warning("the status of %s on instance %d: %s", model.name, index, exc)
            return set()

    def _wait(self, model: LoadedModel, deadline: float, available: bool) -> None:
        """Until every version is AVAILABLE (or the model is gone) on every instance."""
        pending = set(range(len(self.client.rest_ports)))
        while pending:
            for index in sorted(pending):
                states = self.client.rest.version_states(index, model.internal_name, deadline)
                done = (
                    all_available(states, model.versions)
                    if available
                    else all(state == "END" for state in states.values())
                )
                if done:
                    pending.discard(index)
            if not pending:
                return
            if time.monotonic() > deadline:
                what = "become AVAILABLE" if available else "unload"
                raise MultiModelError(
                    f"Model {model.name} did not {what} within {self.load_timeout_seconds:g}s",
                    504 if available else 500,
                )
            time.sleep(POLL_SECONDS)


def _config(models: Sequence[LoadedModel]) -> bytes:
    return model_server_config([m.as_model() for m in models]).SerializeToString()


def _load_error(name: str, exc: Exception) -> MultiModelError:
    """Why a load failed, for the JSON answer (504 when it ran past its deadline), naming the
    model as the client did (not by the model server's name of it)."""
    if isinstance(exc, StatusError):
        error = as_multi_model_error(f"Model {name} could not be loaded", exc)
    else:
        log.error("loading model %s failed", name, exc_info=exc)
        error = MultiModelError(
            f"Model {name} could not be loaded: {type(exc).__name__}: {exc}", 500
        )
    return MultiModelError(error.message.replace(internal_name(name), name), error.status)


def _utf8(text: str) -> bool:
    """Whether `text` can be written out (JSON answers, logs): no lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_name(name: object) -> None:
    """A model_name any load may use: 400 for an empty, overlong or path-leaving one."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise MultiModelError(
            f"model_name must be a non-empty string of at most {MAX_NAME_LENGTH} characters", 400
        )
    if any(ord(c) < 32 for c in name):
        raise MultiModelError("model_name must not contain control characters", 400)
    if not _utf8(name):
        raise MultiModelError("model_name must be valid Unicode (no lone surrogates)", 400)
    if any(segment in (".", "..") for segment in name.replace("\\", "/").split("/")):
        raise MultiModelError(
            f"model_name {name!r} tries to leave its directory ('.' or '..' path segments)", 400
        )
