"""The user's `code/` directory: whether it is there, its requirements, its handlers."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

INFERENCE_FILE = "inference.py"
REQUIREMENTS_FILE = "requirements.txt"
LIB_DIR = "lib"


class UserCodeError(RuntimeError):
    """inference.py or requirements.txt cannot be used; the message says why."""


class RequirementsTimeout(UserCodeError):
    """pip install -r requirements.txt did not finish in time."""


def has_user_code(code_dir: Path) -> bool:
    """The Python service runs for inference.py, requirements.txt or lib/ (successor rule)."""
    return any((code_dir / name).exists() for name in (INFERENCE_FILE, REQUIREMENTS_FILE, LIB_DIR))


def install_requirements(code_dir: Path, target: Path, timeout_seconds: float) -> Path | None:
    """pip install code/requirements.txt into `target` (not site-packages), within a time limit.

    Wheels in code/lib (or a `code/wheelhouse`) are used as a local index. Returns the
    directory to put on sys.path, or None when there is nothing to install.
    """
    requirements = code_dir / REQUIREMENTS_FILE
    if not requirements.exists():
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
    for wheels in (code_dir / LIB_DIR, code_dir / "wheelhouse"):
        if wheels.is_dir():
            command += ["--find-links", str(wheels)]
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


Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Handlers:
    """The user's functions; None where the built-in behaviour applies."""

    handler: Handler | None = None
    input_handler: Handler | None = None
    output_handler: Handler | None = None
    source: str = "built-in"


def load_handlers(code_dir: Path, module_name: str = "inference") -> Handlers:
    """Import code/inference.py (module name `inference`) the way the AWS container does."""
    path = code_dir / INFERENCE_FILE
    if not path.exists():
        return Handlers()
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UserCodeError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
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
