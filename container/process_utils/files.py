"""Files shared between processes: one replaced whole (readers see the old text or the new,
never half), and an exclusive lock that gives up at a deadline."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_POLL_SECONDS = 0.02


def replace_text(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path` (unique to this thread), then rename it
    over `path` (atomic on one file system)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(path: Path, deadline: float, busy: Exception) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made if missing) for the duration, taken
    as soon as no other process holds it; `busy` is raised if it is still held at `deadline`
    (time.monotonic()). The lock ends with its holder, even one that crashed."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy from None
                time.sleep(LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # releases the lock
