"""The user's `code/` directory: whether it is there, its requirements, its handlers."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemaker_serving.service.user_imports import own_imports

log = logging.getLogger(__name__)

INFERENCE_FILE = "inference.py"
REQUIREMENTS_FILE = "requirements.txt"
LIB_DIR = "lib"
WHEELHOUSE_DIR = "wheelhouse"


class UserCodeError(RuntimeError):
    """inference.py or requirements.txt cannot be used; the message says why."""


class RequirementsTimeout(UserCodeError):
    """pip install -r requirements.txt did not finish in time."""


def has_user_code(code_dir: Path) -> bool:
    """The Python service runs when code/ holds any of inference.py, requirements.txt, lib/."""
    return any((code_dir / name).exists() for name in (INFERENCE_FILE, REQUIREMENTS_FILE, LIB_DIR))


def install_requirements(code_dir: Path, target: Path, timeout_seconds: float) -> Path | None:
    """pip install code/requirements.txt into `target` (not site-packages), within a time limit.

    As in the AWS container, a `code/lib` beside it means the requirements are not installed
    (endpoints in network isolation ship their packages in lib): logged, and None returned.
    Wheels in `code/wheelhouse` are a local index. Returns the directory to put on sys.path,
    or None when there is nothing to install.
    """
    requirements = code_dir / REQUIREMENTS_FILE
    if not requirements.exists():
        return None
    if (code_dir / LIB_DIR).is_dir():
        log.info(
            "%s is not installed: %s is there (its packages are used instead, as in the AWS "
            "container)",
            requirements,
            code_dir / LIB_DIR,
        )
        return None
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--target",
        str(target),
        "-r",
        str(requirements),
    ]
    if (code_dir / WHEELHOUSE_DIR).is_dir():
        command += ["--find-links", str(code_dir / WHEELHOUSE_DIR)]
    log.info("installing %s into %s", requirements, target)
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_seconds, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RequirementsTimeout(
            f"pip install -r {requirements} did not finish within {timeout_seconds:.0f}s"
        ) from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise UserCodeError(f"pip install -r {requirements} failed:\n{tail}")
    return target


def code_paths(code_dir: Path, installed: Path | None) -> list[str]:
    """What user code imports from, in order: its requirements, code/lib, code/ itself."""
    paths = [installed, code_dir / LIB_DIR, code_dir]
    return [str(p) for p in paths if p is not None and p.is_dir()]


Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Handlers:
    """The user's functions; None where the built-in behaviour applies."""

    handler: Handler | None = None
    input_handler: Handler | None = None
    output_handler: Handler | None = None
    source: str = "built-in"


def load_handlers(
    code_dir: Path,
    module_name: str = "inference",
    paths: Sequence[str] = (),
    keep: bool = True,
) -> Handlers:
    """Import code/inference.py (module name `inference`) the way the AWS container does,
    with `paths` (code_paths) first and its own versions of what they provide
    (user_imports.own_imports; `keep`: one user per process)."""
    path = code_dir / INFERENCE_FILE
    if not path.exists():
        return Handlers()
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    with own_imports(list(paths) or [str(code_dir)], keep=keep):
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise UserCodeError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    sys.modules[module_name] = module
    handler = getattr(module, "handler", None)
    if callable(handler):
        return Handlers(handler=handler, source=str(path))
    input_handler = getattr(module, "input_handler", None)
    output_handler = getattr(module, "output_handler", None)
    if not callable(input_handler) and not callable(output_handler):
        raise UserCodeError(
            f"{path} defines neither handler(data, context) nor "
            "input_handler(data, context) / output_handler(response, context)"
        )
    return Handlers(
        input_handler=input_handler if callable(input_handler) else None,
        output_handler=output_handler if callable(output_handler) else None,
        source=str(path),
    )
