"""User code may fork (`os.fork`, `multiprocessing` with the fork method, a library that does):
the child must never come back into the process that called the user's function, where it
would read and answer other clients' requests on the connections it inherited.

`call` runs a user function; a child forked inside it that returns or raises out of it ends
there. `close_in_children` closes the caller's sockets in every child forked from then on, so
a child that lives on (a multiprocessing worker, a helper the handler keeps) cannot reach them.

Standard library only: handler processes (environments/host.py) run it under the user's
interpreter.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def call(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args), in the process that called it: a child forked inside fn ends here."""
    pid = os.getpid()
    try:
        return fn(*args)
    finally:
        if os.getpid() != pid:
            end_forked_child(1 if sys.exc_info()[0] is not None else 0)


def end_forked_child(code: int = 0) -> None:
    """End a child that user code forked, without running the parent's clean-up (atexit,
    finalizers, buffered sockets): what it printed is flushed, nothing else is done."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def close_in_children(sockets: Callable[[], Iterable[int]]) -> None:
    """From now on, every child forked from this process closes the file descriptors
    `sockets()` names (called in the child, right after the fork)."""

    def close_all() -> None:
        for fd in list(sockets()):
            with contextlib.suppress(OSError):
                os.close(fd)

    os.register_at_fork(after_in_child=close_all)


def sockets_bound_to(path: str) -> list[int]:
    """The file descriptors of this process that are unix sockets bound to `path`: a
    listening socket and the connections it accepted (they share its name)."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            with contextlib.suppress(OSError, ValueError):
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    continue
                sock = socket.socket(fileno=fd)
                try:
                    local = sock.getsockname()
                finally:
                    sock.detach()
                if local == path:
                    found.append(fd)
    return found
