"""The container's packages that user code sees, and a folder of links to exactly those.

User code sees the standard library, the packages the AWS container offered it (requests,
boto3, grpcio, protobuf) plus numpy, the packages the service itself runs on (they are in its
processes anyway), `sagemaker_serving` (HandlerError, the default handlers), and what its own
`code/lib` and `code/requirements.txt` provide. Everything else installed beside the service
(TensorFlow, pillow, test and benchmark tools) is hidden, as it would be in the AWS image.

`link_site` makes the folder every user environment layers on: a link per top-level entry of
the visible distributions (their packages and `.dist-info`), so pip, run for the user's
environment, sees them installed and installs only what is missing or pinned differently.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name as canonical

# Offered to user code on purpose, with everything they need (their requirements, recursively).
USER_DISTRIBUTIONS = ("requests", "boto3", "grpcio", "protobuf", "numpy")
# The service runs user code in its own processes when it can, so what it imports is there
# anyway; listed so the set is deliberate (and the same in the images).
SERVICE_DISTRIBUTIONS = (
    "falcon",
    "gunicorn",
    "uvicorn",
    "uvicorn-worker",
    "httptools",
    "h2",
    "orjson",
    "prometheus-client",
    "psutil",
    "crc32c",
    "packaging",  # requirements.txt is read with it (environments/requirements.py)
)
# Packages (not distributions) the service's processes import, so user code there sees them:
# ours (HandlerError, Context, the default handlers; the REST JSON writer; process_utils'
# process tree, for the handler processes) and TF Serving's protos (tensorflow-serving-api,
# whose distribution would bring TensorFlow along).
SERVICE_PACKAGES = ("sagemaker_serving", "process_utils", "tfs_rest_json", "tensorflow_serving")

_SKIPPED_TOP = ("..", "__pycache__")
MODULE_SUFFIXES = (".py", ".so", ".pyd")


def requirement_names(requirements: Iterable[str]) -> list[str]:
    """The canonical distribution names of a distribution's requirements (Requires-Dist),
    extras' ones left out; anything unreadable is skipped."""
    names: list[str] = []
    for text in requirements:
        with contextlib.suppress(InvalidRequirement):
            requirement = Requirement(text)
            if requirement.marker is None or "extra" not in str(requirement.marker):
                names.append(canonical(requirement.name))
    return names


def _installed(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def closure(roots: Iterable[str]) -> set[str]:
    """`roots` and everything they require, as canonical names (installed ones only)."""
    seen: set[str] = set()
    pending: list[str] = [canonical(r) for r in roots]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        dist = _installed(name)
        if dist is None:
            continue
        seen.add(name)
        pending += requirement_names(dist.requires or [])
    return seen


def visible_distributions() -> set[str]:
    """Every distribution user code sees (canonical names)."""
    return closure((*USER_DISTRIBUTIONS, *SERVICE_DISTRIBUTIONS))


def top_level_names(dist: importlib.metadata.Distribution) -> set[str]:
    """The importable top-level names a distribution installs."""
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    names = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first.endswith((".dist-info", ".egg-info", ".data")) or first in _SKIPPED_TOP:
            continue
        if len(file.parts) == 1:
            if not first.endswith(MODULE_SUFFIXES):
                continue
            first = first.split(".")[0]
        names.add(first)
    return {name for name in names if name.isidentifier()}


def container_names() -> frozenset[str]:
    """Top-level modules user code shares with the service: the visible distributions' and
    `sagemaker_serving`. A user environment that brings its own copy of one of them cannot
    run in the service's processes."""
    names = set(SERVICE_PACKAGES)
    for name in visible_distributions():
        dist = _installed(name)
        if dist is not None:
            names |= top_level_names(dist)
    return frozenset(names)


def hidden_names() -> frozenset[str]:
    """Top-level modules installed beside the service that user code must not see."""
    visible = visible_distributions()
    allowed = {*SERVICE_PACKAGES, *sys.stdlib_module_names}
    hidden: set[str] = set()
    for dist in importlib.metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        names = top_level_names(dist)
        (allowed.update if name in visible else hidden.update)(names)
    return frozenset(hidden - allowed)


def provided_names(directories: Iterable[str | Path]) -> set[str]:
    """Top-level module names importable from `directories`: modules, and folders that hold
    modules (packages; a folder of data only, such as assets/, is none)."""
    names = set()
    for directory in directories:
        path = Path(directory)
        if not path.is_dir():
            continue
        for entry in path.iterdir():
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_dir() and not entry.name.endswith((".dist-info", ".egg-info")):
                if any(child.suffix in MODULE_SUFFIXES for child in entry.iterdir()):
                    names.add(entry.name)
            elif entry.suffix in MODULE_SUFFIXES:
                names.add(entry.name.split(".")[0])
    return {n for n in names if n.isidentifier()}


def package_folders(names: Iterable[str]) -> list[Path]:
    """The folders of the (regular) packages `names`, where they are installed."""
    folders = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders.append(Path(next(iter(spec.submodule_search_locations))).resolve())
    return folders


def fingerprint() -> str:
    """Changes whenever the visible distributions or the service's packages do (an upgrade):
    a folder of links made before is stale then."""
    parts = []
    for name in sorted(visible_distributions()):
        dist = _installed(name)
        if dist is not None:
            parts.append(f"{name}=={dist.version}@{dist.locate_file('')}")
    parts += [str(folder) for folder in package_folders(SERVICE_PACKAGES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _files(dist: importlib.metadata.Distribution) -> list[str]:
    """The paths a distribution installed, relative to its site directory, as RECORD lists
    them (plain strings: TensorFlow's RECORD alone has tens of thousands)."""
    text = dist.read_text("RECORD") or ""
    paths = []
    for line in text.splitlines():
        path = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
        if path and not path.startswith(_SKIPPED_TOP):
            paths.append(path.strip('"'))
    return paths


def _foreign_folders(wanted: Iterable[str]) -> set[str]:
    """The folders (relative to their site directory) that a distribution other than `wanted`
    installs anything into."""
    folders: set[str] = set()
    for dist in importlib.metadata.distributions():
        if canonical(dist.metadata["Name"] or "") not in wanted:
            for path in _files(dist):
                parts = path.split("/")
                folders.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
    return folders


def link_site(target: Path, distributions: Iterable[str], packages: Iterable[Path] = ()) -> Path:
    """Fill `target` with links to the files of `distributions` (canonical names, installed
    ones) and to the package folders `packages`: a folder or module that only they install is
    one link; one shared with another distribution (a namespace such as `google/`) is a real
    folder holding links to their parts. Returns `target`."""
    wanted = {name: dist for name in distributions if (dist := _installed(name)) is not None}
    target.mkdir(parents=True, exist_ok=True)
    foreign = _foreign_folders(wanted)
    for dist in wanted.values():
        for path in _files(dist):
            parts = path.split("/")
            depth = 1
            while depth < len(parts) and "/".join(parts[:depth]) in foreign:
                depth += 1
            relative = "/".join(parts[:depth])
            _link(target / relative, Path(str(dist.locate_file(relative))))
    for package in packages:
        _link(target / package.name, package)
    return target


def _link(link: Path, source: Path) -> None:
    if link.is_symlink() or link.exists() or not source.exists():
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(source, link)
