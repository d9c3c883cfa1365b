"""Each multi-model model's handlers: its own code/inference.py, else the universal code, else
the built-in formats. A model's own code that brings packages runs in handler processes of
its own (environments.py); the rest is imported in the workers, and tried at load."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from sagemaker_serving.environments import build
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.environments.hidden import import_handlers
from sagemaker_serving.environments.remote import pool_handlers
from sagemaker_serving.multimodel.environments import ModelEnvironments
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.registry import LoadedModel, Registry
from sagemaker_serving.user_code.loading import (
    INFERENCE_FILE,
    Handlers,
    UserCodeError,
    UserCodeTimeout,
)

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # internal name, url, handler pool folder


class ModelCode:
    """Per-model handlers in this worker, imported (or connected to) on first use, cached."""

    def __init__(
        self,
        universal: Handlers | None,
        environments: ModelEnvironments,
        registry: Registry,
        threads: int,
    ) -> None:
        self.universal = universal  # the universal code's handlers (serve prepared them)
        self.environments = environments
        self.registry = registry
        self.threads = threads
        self._cache: dict[Key, Handlers] = {}
        self._locks: dict[Key, threading.Lock] = {}
        self._lock = threading.Lock()  # the two dicts; a model's import holds its own lock only

    # ----- load and unload (MultiModelManager's prepare and release) --------------------------

    def prepare(self, model: LoadedModel, deadline: float) -> LoadedModel:
        """Before the load: the model's environment and, when it needs them, its handler
        processes; else its inference.py tried in a process of its own, so code that cannot
        be imported fails the load (400) and not every invocation after it."""
        self._stop_leftovers()
        if not build.has_user_code(model.code_dir):
            return model
        env_dir, pool_dir = self.environments.prepare(model.code_dir, model.internal_name, deadline)
        if not build.has_handlers(
            model.code_dir
        ):  # requirements.txt installed (or refused), lib/ ...
            log.warning(
                "model %s: %s has no %s: the universal code or the built-in formats serve it",
                model.name,
                model.code_dir,
                INFERENCE_FILE,
            )
            return replace(model, environment=env_dir)
        if not pool_dir:
            try:
                build.check_import(
                    model.code_dir,
                    f"inference_{model.internal_name}",
                    [],
                    max(1.0, deadline - time.monotonic()),
                )
            except UserCodeError as exc:
                status = 504 if isinstance(exc, UserCodeTimeout) else 400
                raise MultiModelError(str(exc), status) from None
        return replace(model, handlers=pool_dir, environment=env_dir)

    def release(self, model: LoadedModel) -> None:
        """At unload: the model's processes stopped (its environment kept)."""
        self.environments.release(model.handlers)
        self.forget(model)

    def abandon(self, model: LoadedModel) -> None:
        """When the load failed after `prepare`: its processes stopped, and its environment
        removed if this load made it."""
        self.environments.abandon(model.environment, model.handlers)
        self.forget(model)

    def revive(self, model: LoadedModel, taken_over: bool = False) -> LoadedModel:
        """Handler processes again for a loaded model whose pool is gone (killed), or whose
        socket another process took over: under the registry's lock, once, whichever worker
        finds it first."""
        with self.registry.locked():
            models, generation, _ = self.registry.snapshot()
            current = models.get(model.name)
            if current is None or not current.handlers or current.handlers != model.handlers:
                return current or model  # unloaded, or another worker revived it
            if handler_pool.running(Path(current.handlers)) and not taken_over:
                return current
            why = "lost their socket to another process" if taken_over else "are gone"
            log.error("the handler processes of model %s %s: starting them again", model.name, why)
            deadline = time.monotonic() + self.environments.config.load_timeout_seconds
            pool_dir = self.environments.restart(
                current.environment, current.internal_name, deadline
            )
            self.environments.release(current.handlers)
            revived = replace(current, handlers=pool_dir)
            self.registry.write({**models, model.name: revived}, generation)
            return revived

    def _stop_leftovers(self) -> None:
        used = {m.handlers for m in self.registry.read().values() if m.handlers}
        crashed = {m.handlers for m in self.registry.unloaded_by_a_crash().values() if m.handlers}
        for pool_dir in self.environments.leftovers(used, crashed):
            log.warning("stopping handler processes no loaded model uses: %s", pool_dir)
            self.environments.release(pool_dir)

    # ----- invocations ------------------------------------------------------------------------

    def handlers(self, model: LoadedModel) -> Handlers:
        key = (model.internal_name, model.url, model.handlers)
        handlers = self._cache.get(key)  # one dict read (atomic): no lock once imported
        if handlers is not None:
            return handlers
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one import per model at a time; other models go on
            handlers = self._cache.get(key)
            if handlers is None:
                handlers = self._load(model)
                with self._lock:
                    self._drop(model.internal_name)
                    self._cache[key] = handlers
                    self._locks[key] = lock
            return handlers

    def _load(self, model: LoadedModel) -> Handlers:
        if build.has_handlers(model.code_dir):
            if model.handlers:
                try:  # ready since its load (or its revival): asked once, not waited for
                    return pool_handlers(
                        Path(model.handlers), model.code_dir, self.threads, time.monotonic()
                    )
                except handler_pool.PoolError:
                    raise MultiModelError(
                        f"The handler processes of model {model.name} are not ready", 503
                    ) from None
            return import_handlers(model.code_dir, f"inference_{model.internal_name}")
        return self.universal if self.universal is not None else Handlers()

    def _drop(self, internal_name: str) -> None:
        for key in [k for k in self._cache if k[0] == internal_name]:
            handlers = self._cache.pop(key)
            self._locks.pop(key, None)
            if handlers.remote is not None:
                handlers.remote.close()

    def forget(self, model: LoadedModel) -> None:
        with self._lock:
            self._drop(model.internal_name)
