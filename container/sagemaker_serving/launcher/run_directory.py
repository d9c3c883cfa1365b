"""The run directory: where serve writes its configs, environments and state, all of which the
stack later reads and runs (a venv's interpreter, an environment.json). So it must be the
serving user's alone: a new private one, or a given one that nobody else can change.

A directory another user made first (in a world-writable parent such as /tmp), one that others
may write to, or one under a parent where another user could swap it for theirs, is refused,
as is a directory inside it that belongs to someone else (serve reuses some of what it finds).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from sagemaker_serving.errors import StartupError


class UnsafeRunDirectory(StartupError):
    """The run directory (or one in or above it) is not the serving user's alone."""


class NoTemporaryDirectory(StartupError):
    """No temporary directory can be written (a read-only root without a tmpfs on /tmp)."""


def prepare(requested: Path | None) -> Path:
    """A new private directory, or `requested` (made 0700 when missing), checked."""
    if requested is None:
        try:
            return Path(tempfile.mkdtemp(prefix="sagemaker-serve-"))
        except OSError as exc:  # tempfile tried TMPDIR, /tmp, /var/tmp, ... and none was usable
            raise NoTemporaryDirectory(
                f"no writable temporary directory for the run directory ({exc.strerror or exc}; "
                f"TMPDIR={os.environ.get('TMPDIR', '')!r}): with a read-only root file system, "
                "mount a tmpfs on /tmp (docker run --read-only --tmpfs /tmp), or set TMPDIR to a "
                "writable directory"
            ) from None
    requested.absolute().parent.mkdir(parents=True, exist_ok=True)
    try:
        requested.mkdir(mode=0o700)
    except FileExistsError:
        pass
    path = requested.resolve()
    check(path)
    return path


def check(path: Path) -> None:
    """UnsafeRunDirectory unless `path`, every directory in it and every directory above it
    are beyond other users' reach."""
    euid = os.geteuid()
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRunDirectory(f"run directory {path} is not a directory")
    _own(path, info, euid, "run directory")
    for ancestor in path.parents:
        above = os.stat(ancestor)
        if above.st_uid not in (0, euid):
            raise UnsafeRunDirectory(
                f"run directory {path}: {ancestor} above it belongs to uid {above.st_uid}, who "
                "could put another directory in its place; choose a directory of your own"
            )
        if above.st_mode & 0o002 and not above.st_mode & stat.S_ISVTX:
            raise UnsafeRunDirectory(
                f"run directory {path}: {ancestor} above it is writable by other users "
                f"(mode {stat.S_IMODE(above.st_mode):o}, no sticky bit), who could put another "
                "directory in its place; choose a directory of your own"
            )
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _own(Path(entry.path), entry.stat(follow_symlinks=False), euid, "directory")


def _own(path: Path, info: os.stat_result, euid: int, what: str) -> None:
    if info.st_uid != euid:
        raise UnsafeRunDirectory(
            f"{what} {path} belongs to uid {info.st_uid}, not to the user serve runs as "
            f"(uid {euid}): everything in it is run as this user; remove it or choose another "
            "--run-dir"
        )
    if info.st_mode & 0o022:
        raise UnsafeRunDirectory(
            f"{what} {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            f"chmod go-w {path}, or choose another --run-dir"
        )
