"""What user code may import when it runs in the service's own processes: the container's
packages it sees (environments/visible.py), and what its own directories provide.

A finder first on `sys.meta_path` makes an import of any other package installed beside the
service (TensorFlow, pillow, test tools) fail with ModuleNotFoundError, as in the AWS image,
unless one of the user's directories provides it. Nothing is ever imported twice: a module
the service has loaded is the one user code gets (user code that brings its own copy of one
runs in processes of its own, environments/build.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from pathlib import Path

from sagemaker_serving.environments.visible import hidden_names
from sagemaker_serving.user_code.loading import load_handlers


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


def add_user_paths(directories: Sequence[str]) -> None:
    """The user's directories first on sys.path, and allowed to provide hidden names."""
    finder = hide_container_packages()
    for directory in reversed(directories):
        if directory not in sys.path:
            sys.path.insert(0, directory)
        if directory not in finder.user_paths:
            finder.user_paths.insert(0, directory)


def import_handlers(code_dir: Path, module_name: str = "inference", paths: Sequence[str] = ()):
    """The user's handlers imported in one of the service's workers: the container's other
    packages hidden, the user's directories first and allowed to provide them."""
    add_user_paths(list(paths))
    return load_handlers(code_dir, module_name, paths)
