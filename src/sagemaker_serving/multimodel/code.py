"""Each multi-model model's handlers: its own code/, else the universal code directory, else
the built-in formats. A model's own code that brings packages runs in handler processes of
its own (environments.py); the rest is imported in the workers."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.environments.build import has_user_code
from sagemaker_serving.environments.remote import HandlerPool
from sagemaker_serving.multimodel.environments import ModelEnvironments
from sagemaker_serving.multimodel.registry import LoadedModel, Registry
from sagemaker_serving.service.user_code import Handlers, load_handlers


class ModelCode:
    """Per-model handlers in this worker, imported (or connected to) on first use, cached."""

    def __init__(
        self,
        universal_dir: Path | None,
        universal: Handlers | None,
        environments: ModelEnvironments,
        registry: Registry,
        threads: int,
    ) -> None:
        self.universal_dir = universal_dir
        self.universal = universal  # the universal code's handlers (serve prepared them)
        self.environments = environments
        self.registry = registry
        self.threads = threads
        self._cache: dict[tuple[str, str, str], Handlers] = {}
        self._lock = threading.Lock()

    def own_code(self, model: LoadedModel) -> bool:
        return has_user_code(model.code_dir)

    def prepare(self, model: LoadedModel, deadline: float) -> LoadedModel:
        """At load (under the registry's lock): the model's environment and, when it needs
        them, its handler processes (MultiModelManager.load's `prepare`)."""
        self._reconcile()
        if not self.own_code(model):
            return model
        pool_dir = self.environments.prepare(model.code_dir, model.internal_name, deadline)
        return replace(model, handlers=pool_dir)

    def release(self, model: LoadedModel) -> None:
        """At unload, or when the load failed after `prepare`."""
        self.environments.release(model.handlers, model.internal_name)
        self.forget(model)

    def _reconcile(self) -> None:
        """Stop pools no loaded model uses (their models went with a model server's death)."""
        used = {m.handlers for m in self.registry.read().values() if m.handlers}
        for record in self.environments.records():
            try:
                directory = record.read_text()
            except OSError:
                continue
            if directory not in used:
                self.environments.release(directory, "")

    def handlers(self, model: LoadedModel) -> Handlers:
        key = (model.internal_name, model.url, model.handlers)
        with self._lock:
            if key not in self._cache:
                self._drop(model.internal_name)
                self._cache[key] = self._load(model)
            return self._cache[key]

    def _load(self, model: LoadedModel) -> Handlers:
        if self.own_code(model):
            if model.handlers:
                directory = Path(model.handlers)
                status = handler_pool.read_status(directory) or {}
                remote = HandlerPool(
                    str(directory / handler_pool.SOCKET_NAME),
                    tuple(status.get("functions") or ()),
                    self.threads,
                )
                return Handlers(source=f"{model.code_dir} (handler processes)", remote=remote)
            return load_handlers(model.code_dir, module_name=f"inference_{model.internal_name}")
        if self.universal is not None:
            return self.universal
        return Handlers()

    def _drop(self, internal_name: str) -> None:
        for key in [k for k in self._cache if k[0] == internal_name]:
            handlers = self._cache.pop(key)
            if handlers.remote is not None:
                handlers.remote.close()

    def forget(self, model: LoadedModel) -> None:
        with self._lock:
            self._drop(model.internal_name)
