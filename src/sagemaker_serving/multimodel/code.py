"""Each multi-model model's handlers: its own code/ (inference.py, lib/, requirements.txt
installed at load), else the universal code directory, else the built-in formats."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.registry import LoadedModel
from sagemaker_serving.service.user_code import (
    Handlers,
    RequirementsTimeout,
    UserCodeError,
    code_paths,
    has_user_code,
    install_requirements,
    load_handlers,
)


class ModelCode:
    """Per-model handlers in this worker, imported on first use and cached."""

    def __init__(
        self,
        universal_dir: Path | None,
        universal_paths: list[str],
        packages_root: Path,
        timeout: float,
    ) -> None:
        self.universal_dir = universal_dir
        self.universal_paths = universal_paths  # its code/, lib and requirements (at start)
        self.packages_root = packages_root
        self.timeout = timeout
        self._cache: dict[tuple[str, str], Handlers] = {}
        self._lock = threading.Lock()

    def code_dir(self, model: LoadedModel) -> Path | None:
        if has_user_code(model.code_dir):
            return model.code_dir
        if self.universal_dir is not None and has_user_code(self.universal_dir):
            return self.universal_dir
        return None

    def install(self, model: LoadedModel, deadline: float) -> None:
        """The model's own requirements.txt, into a directory of its own, before the load
        goes on (MultiModelManager.load's `prepare`): 400 when pip fails, 504 past the
        deadline."""
        target = self.packages_root / model.internal_name
        try:
            install_requirements(model.code_dir, target, max(1.0, deadline - time.monotonic()))
        except UserCodeError as exc:
            shutil.rmtree(target, ignore_errors=True)
            status = 504 if isinstance(exc, RequirementsTimeout) else 400
            raise MultiModelError(f"Model {model.name}: {exc}", status) from None

    def handlers(self, model: LoadedModel) -> Handlers:
        key = (model.internal_name, model.url)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._load(model)
            return self._cache[key]

    def _load(self, model: LoadedModel) -> Handlers:
        code_dir = self.code_dir(model)
        if code_dir is None:
            return Handlers()
        if code_dir == self.universal_dir:
            paths = self.universal_paths
        else:
            installed = self.packages_root / model.internal_name
            paths = code_paths(code_dir, installed if installed.is_dir() else None)
        return load_handlers(
            code_dir, module_name=f"inference_{model.internal_name}", paths=paths, keep=False
        )

    def forget(self, model: LoadedModel) -> None:
        with self._lock:
            self._cache.pop((model.internal_name, model.url), None)

    def remove(self, model: LoadedModel) -> None:
        """Forget the model and delete what `install` put on disk for it (after an unload, or
        a load that failed once installed): a churn of models leaves no packages behind."""
        self.forget(model)
        shutil.rmtree(self.packages_root / model.internal_name, ignore_errors=True)
