"""Find the SavedModels under the model directory (/opt/ml/model) and their versions.

A version is a directory named with digits only that directly holds `saved_model.pb` or
`saved_model.pbtxt`; its parent is the model's base path and the parent's name the model's
name, except that versions directly in the model directory make a model named `model`. Also
the user code that would be ignored: a `code/` or an `inference.py` anywhere but where the
container reads it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_serving.config.routing_rules import MODEL_NAME_PATTERN, MODEL_NAME_RULE
from sagemaker_serving.errors import StartupError
from tfs_rest_json.model_version import is_model_version

log = logging.getLogger(__name__)

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
TOP_LEVEL_MODEL_NAME = "model"
CODE_DIR = "code"
MAX_ENTRIES = 20_000  # looked at for misplaced code: a model directory is small, a mistake not
_VERSION_DIR = re.compile(r"[0-9]+")
_LAYOUTS = (
    "<model_dir>/<version>/saved_model.pb (a model named 'model') or "
    "<model_dir>/<name>/<version>/saved_model.pb, <version> being digits only "
    "(saved_model.pbtxt also works)"
)


class ModelDiscoveryError(StartupError):
    """The model directory does not hold a usable set of SavedModels."""


@dataclass(frozen=True)
class Model:
    """A model to serve: its name, absolute base path and version numbers (sorted)."""

    name: str
    base_path: Path
    versions: tuple[int, ...]


def discover_models(model_dir: Path) -> list[Model]:
    """Every model under `model_dir`, sorted by name; ModelDiscoveryError if there are none."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        problem = "is not a directory" if model_dir.exists() else "does not exist"
        raise ModelDiscoveryError(f"model directory {model_dir} {problem}")
    if not os.access(model_dir, os.R_OK | os.X_OK):
        raise ModelDiscoveryError(
            f"model directory {model_dir} cannot be read by uid {os.geteuid()}, the user serve "
            "runs as: make it readable by all (chmod -R a+rX; SageMaker's extracted "
            "model.tar.gz is), or run the container with --user 0"
        )
    models: dict[str, Model] = {}
    try:  # Python 3.11's os.walk recurses: a folder per level
        found = list(_model_dirs(model_dir))
    except RecursionError:
        raise ModelDiscoveryError(
            f"model directory {model_dir}: its folders nest too deep"
        ) from None
    for directory, versions in found:
        name = TOP_LEVEL_MODEL_NAME if directory == model_dir else directory.name
        model = Model(name, directory.resolve(), versions)
        if not MODEL_NAME_PATTERN.fullmatch(name):
            raise ModelDiscoveryError(
                f"model directory {directory}: {name!r} is not a valid model name "
                f"({MODEL_NAME_RULE})"
            )
        other = models.get(name)
        if other is not None and other.base_path != model.base_path:
            raise ModelDiscoveryError(
                f"two models are named {name!r}: {other.base_path} and {model.base_path}; "
                "rename one of the directories"
            )
        models[name] = model
    if not models:
        hint = ""
        if any((model_dir / f).is_file() for f in SAVED_MODEL_FILES):
            hint = "; the SavedModel directly in it needs a version directory, e.g. 1/"
        elif (stray := _unversioned(model_dir)) is not None:
            hint = f"; the SavedModel in {stray}/ needs a version directory, e.g. {stray}/1/"
        raise ModelDiscoveryError(f"no SavedModel found in {model_dir}{hint}; expected {_LAYOUTS}")
    return [models[name] for name in sorted(models)]


def _unversioned(model_dir: Path) -> Path | None:
    """The first folder under `model_dir` (relative to it) holding a SavedModel's file itself,
    not in a version directory: `<name>/saved_model.pb`, a common mistake."""
    for name in SAVED_MODEL_FILES:
        for path in sorted(model_dir.rglob(name)):
            if path.is_file() and not path.parent.name.isdigit():
                return path.parent.relative_to(model_dir)
    return None


def find_model(url: Path, name: str) -> Model | None:
    """The first directory under `url` (itself included) holding SavedModel versions, as
    model `name`; None when there is none (how a multi-model load finds its versions)."""
    for directory, versions in _model_dirs(Path(url)):
        return Model(name, directory.resolve(), versions)
    return None


def default_model(models: Sequence[Model], requested: str | None) -> Model:
    """The model named `requested`, or else the first by name (of discover_models' list:
    never empty)."""
    if requested is None:
        return min(models, key=lambda m: m.name)
    for model in models:
        if model.name == requested:
            return model
    available = ", ".join(sorted(m.name for m in models))
    raise ModelDiscoveryError(f"default model {requested!r} not found; available: {available}")


def misplaced_code(model_dir: Path, read_from: Path | None) -> list[Path]:
    """`code` folders and `inference.py` files under `model_dir` other than `read_from` and
    what it holds (None: nothing there is read), sorted; a `code` folder stands for what is
    in it. Hidden folders and symbolic links are not followed."""
    found: list[Path] = []
    seen = 0
    for top, dirs, files in os.walk(model_dir):
        here = Path(top)
        kept = []
        for name in sorted(dirs):
            path = here / name
            if name.startswith(".") or path == read_from or path.is_symlink():
                continue
            if name == CODE_DIR:
                found.append(path)
            else:
                kept.append(name)
        dirs[:] = kept
        found.extend(here / name for name in files if name == "inference.py")
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            break
    return sorted(found)


def _model_dirs(model_dir: Path) -> Iterator[tuple[Path, tuple[int, ...]]]:
    """(directory, versions) for each directory with at least one version, walking depth first
    in name order.

    Symbolic links are followed, but each real directory is descended into once (no loops).
    Hidden directories, the top-level `code` directory and version directories are not
    descended into.
    """
    visited = {_identity(model_dir)}
    for top, dirs, files in os.walk(model_dir, onerror=_skipped, followlinks=True):
        directory = Path(top)
        if any(f in files for f in SAVED_MODEL_FILES):  # never a version directory: not walked
            fix = (
                f"a version directory itself: name {directory.parent} instead"
                if directory.name.isdigit()
                else f"put it in {directory / '1'}"
            )
            log.warning(
                "skipping %s: a SavedModel without a version directory (%s)", directory, fix
            )
        names = sorted(n for n in dirs if not n.startswith("."))
        if directory == model_dir:
            names = [n for n in names if n != CODE_DIR]
        children = [directory / name for name in names]
        version_dirs = [c for c in children if _VERSION_DIR.fullmatch(c.name) and _is_version(c)]
        versions = _versions(directory, children, version_dirs) if version_dirs else ()
        if versions:
            yield directory, versions
        dirs[:] = []
        for child in children:
            identity = None if child in version_dirs else _identity(child)
            if identity is not None and identity not in visited:
                visited.add(identity)
                dirs.append(child.name)


def _skipped(exc: OSError) -> None:
    log.warning("skipping %s: %s", exc.filename, exc.strerror or exc)


def _identity(directory: Path) -> tuple[int, int] | None:
    """(device, inode) of a directory, following links; None when it cannot be read."""
    try:
        stat = directory.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _is_version(directory: Path) -> bool:
    return any((directory / f).is_file() for f in SAVED_MODEL_FILES)


def _versions(
    base: Path, children: Sequence[Path], version_dirs: Sequence[Path]
) -> tuple[int, ...]:
    """Version numbers of `version_dirs`; warns about numeric siblings without a SavedModel."""
    for child in children:
        if _VERSION_DIR.fullmatch(child.name) and child not in version_dirs:
            log.warning("skipping %s: numeric directory without a SavedModel", child)
    by_number: dict[int, Path] = {}
    for directory in version_dirs:
        number = int(directory.name)
        if not is_model_version(number):
            log.warning("skipping %s: version number does not fit in 64 bits", directory)
            continue
        if number in by_number:
            raise ModelDiscoveryError(
                f"{by_number[number]} and {directory} are both version {number} of model {base}"
            )
        by_number[number] = directory
    return tuple(sorted(by_number))
