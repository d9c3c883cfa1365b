"""The user's handlers: code/inference.py imported the way the AWS container does.

Standard library only: the handler processes (environments/host.py) import it under the
user's interpreter, the service's workers in their own.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sagemaker_serving.errors import StartupError
from sagemaker_serving.user_code import fork_guard

INFERENCE_FILE = "inference.py"
HANDLER_NAMES = ("handler", "input_handler", "output_handler")


class UserCodeError(StartupError):
    """inference.py or requirements.txt cannot be used; the message says why (at start-up,
    serve's; on a multi-model endpoint, a load's 400)."""


class UserCodeTimeout(UserCodeError):
    """pip install -r requirements.txt, or importing inference.py, did not finish in time."""


Handler = Callable[[Any, Any], Any]


class HandlerProcesses(Protocol):
    """Handlers that run in processes of their own (environments/remote.py's HandlerPool)."""

    functions: tuple[str, ...]
    unreachable: bool
    taken_over: bool

    async def run(self, body: bytes, context: Any, callbacks: Any) -> tuple[dict, Any]: ...

    async def alive(self) -> bool: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Handlers:
    """The user's functions; None where the built-in behaviour applies."""

    handler: Handler | None = None
    input_handler: Handler | None = None
    output_handler: Handler | None = None
    source: str = "built-in"
    remote: HandlerProcesses | None = None  # set: the functions run in handler processes

    @property
    def names(self) -> list[str]:
        if self.remote is not None:
            return list(self.remote.functions)
        return [name for name in HANDLER_NAMES if getattr(self, name) is not None]


def import_error_message(path: Path, exc: BaseException) -> str:
    """`importing inference.py failed: <error> (inference.py, line N)`: the user's own line
    that raised, found in the traceback (or the SyntaxError's own position)."""
    position = ""
    if not isinstance(exc, SyntaxError):  # a SyntaxError's message names the file and line
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        if frames:
            position = f" ({path.name}, line {frames[-1].lineno})"
    return f"importing {path} failed: {type(exc).__name__}: {exc}{position}"


def load_handlers(
    code_dir: Path, module_name: str = "inference", paths: Sequence[str] = ()
) -> Handlers:
    """Import code/inference.py as `module_name` with `paths` (the user's directories) first
    on sys.path (in the service's workers, environments/hidden.py's import_handlers also hides
    the container's other packages). `handler`, else `input_handler` (with an optional
    `output_handler`), must be defined."""
    path = code_dir / INFERENCE_FILE
    if not path.exists():
        return Handlers()
    sys.path[:0] = [p for p in paths if p not in sys.path]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        fork_guard.call(spec.loader.exec_module, module)  # a child forked there ends there
    except (Exception, SystemExit) as exc:  # SystemExit: sys.exit() while importing
        sys.modules.pop(module_name, None)
        raise UserCodeError(import_error_message(path, exc)) from exc
    found = {name: getattr(module, name, None) for name in HANDLER_NAMES}
    if callable(found["handler"]):
        return Handlers(handler=found["handler"], source=str(path))
    if not callable(found["input_handler"]):
        raise UserCodeError(
            f"{path} defines neither handler(data, context) nor input_handler(data, context) "
            "(with an optional output_handler(response, context)): looked for handler, "
            "input_handler, output_handler"
        )
    output_handler = found["output_handler"]
    return Handlers(
        input_handler=found["input_handler"],
        output_handler=output_handler if callable(output_handler) else None,
        source=str(path),
    )
