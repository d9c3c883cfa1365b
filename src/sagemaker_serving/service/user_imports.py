"""What user code can import, and imports of each user's own packages apart from the service's.

User code (inference.py and what it imports) sees the standard library, the packages the AWS
container offered it (requests, boto3, grpcio, protobuf) plus numpy, the packages the service
itself runs on, and what its own `code/lib` and `code/requirements.txt` provide. Everything
else installed beside the service (TensorFlow, pillow, test and benchmark tools) is hidden:
importing it raises ModuleNotFoundError, as it would in the AWS image.

A user's package that the service (or another model) has already imported, such as a pinned
`requests`, is imported afresh from the user's directories: while the user's module is
imported, the service's copies are set aside in `sys.modules`, and put back afterwards, so the
user's module holds the user's version and the service keeps running on its own.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import logging
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

# Offered to user code on purpose, with everything they need (their requirements, recursively).
USER_DISTRIBUTIONS = ("requests", "boto3", "grpcio", "protobuf", "numpy")
# The service runs in the user's process, so what it imports is there anyway; listed so the
# set is deliberate (and the same in the images, where nothing else is installed).
SERVICE_DISTRIBUTIONS = (
    "falcon",
    "gunicorn",
    "uvicorn",
    "uvicorn-worker",
    "httptools",
    "orjson",
    "prometheus-client",
    "psutil",
    "crc32c",
)
SERVICE_PACKAGE = "sagemaker_serving"  # HandlerError, Context, the default handlers

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: importlib.metadata.Distribution) -> list[str]:
    """Names of what `dist` needs unconditionally (extras left out)."""
    names = []
    for requirement in dist.requires or []:
        if "extra ==" in requirement.replace(" ", " "):
            continue
        match = _NAME.match(requirement)
        if match:
            names.append(match.group(0))
    return names


def visible_distributions(roots: Iterable[str]) -> set[str]:
    """`roots` and everything they require, as canonical names (installed ones only)."""
    seen: set[str] = set()
    pending = [_canonical(r) for r in roots]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        pending += [_canonical(r) for r in _requirements(dist)]
    return seen


def top_level_names(dist: importlib.metadata.Distribution) -> set[str]:
    """The importable top-level names a distribution installs."""
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    names = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", "__pycache__"):
            continue
        if len(file.parts) == 1:
            if not first.endswith((".py", ".so", ".pyd")):
                continue
            first = first.split(".")[0]
        names.add(first)
    return names


def hidden_names() -> frozenset[str]:
    """Top-level modules installed beside the service that user code must not see."""
    visible = visible_distributions((*USER_DISTRIBUTIONS, *SERVICE_DISTRIBUTIONS))
    allowed = {SERVICE_PACKAGE, *sys.stdlib_module_names}
    hidden: set[str] = set()
    for dist in importlib.metadata.distributions():
        name = _canonical(dist.metadata["Name"] or "")
        names = top_level_names(dist)
        (allowed.update if name in visible else hidden.update)(names)
    return frozenset(hidden - allowed)


def provided_names(directories: Iterable[str | Path]) -> set[str]:
    """Top-level module names importable from `directories` (packages and modules)."""
    names = set()
    for directory in directories:
        path = Path(directory)
        if not path.is_dir():
            continue
        for entry in path.iterdir():
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_dir() and not entry.name.endswith((".dist-info", ".egg-info")):
                names.add(entry.name)
            elif entry.suffix in (".py", ".so", ".pyd"):
                names.add(entry.name.split(".")[0])
    return {n for n in names if n.isidentifier()}


class HiddenPackages(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: an import of a hidden top-level module fails, unless one of
    the user's directories provides it."""

    def __init__(self, hidden: frozenset[str]) -> None:
        self.hidden = hidden
        self.user_paths: list[str] = []

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None):
        if path is not None or fullname not in self.hidden:
            return None  # a submodule (its package was allowed), or a name not hidden
        spec = importlib.machinery.PathFinder.find_spec(fullname, self.user_paths)
        if spec is not None:
            return spec
        raise ModuleNotFoundError(
            f"No module named '{fullname}' (it is installed for the container itself, not for "
            "user code: add it to code/requirements.txt or code/lib)",
            name=fullname,
        )


_finder: HiddenPackages | None = None


def hide_container_packages() -> HiddenPackages:
    """Install the finder once per process (idempotent)."""
    global _finder
    if _finder is None:
        _finder = HiddenPackages(hidden_names())
        sys.meta_path.insert(0, _finder)
    return _finder


def _set_aside(names: set[str]) -> dict[str, ModuleType]:
    """Take the modules of the top-level `names` (and their submodules) out of sys.modules."""
    taken = {}
    for key in list(sys.modules):
        if key.partition(".")[0] in names:
            taken[key] = sys.modules.pop(key)
    return taken


@contextlib.contextmanager
def own_imports(directories: Sequence[str], keep: bool) -> Iterator[None]:
    """Imports in the block resolve first from the user's `directories`, and a module those
    directories provide is imported from them even when the service (or another model) has
    it already. Afterwards the service's modules are back in sys.modules; with `keep`, the
    directories stay on sys.path and the user's other modules in sys.modules (one user per
    process), else both are taken out again (multi-model: the next model imports its own)."""
    finder = hide_container_packages()
    directories = [d for d in directories if Path(d).is_dir()]
    provided = provided_names(directories)
    earlier = _set_aside(provided)
    if earlier:
        names = sorted({key.partition(".")[0] for key in earlier})
        log.info("user code brings its own %s", ", ".join(names))
    saved_path, saved_user_paths = list(sys.path), list(finder.user_paths)
    sys.path[:0] = [d for d in directories if d not in sys.path]
    finder.user_paths[:0] = directories
    try:
        yield
    finally:
        users = _set_aside(provided)
        if keep:
            sys.modules.update({k: v for k, v in users.items() if k not in earlier})
        else:
            sys.path[:] = saved_path
            finder.user_paths[:] = saved_user_paths
        sys.modules.update(earlier)
