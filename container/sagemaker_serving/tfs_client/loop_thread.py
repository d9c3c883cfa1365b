"""This process's event loop for the model server client's synchronous callers.

The client (http11.py) is asyncio's. A caller on a thread (the built-in formats' metadata, the
multi-model manager's status polls) has its exchange made on this loop: a daemon thread started
on first use in each process (a forked worker starts its own), with kept-alive connections of
its own, so one client serves the event loop and the threads alike.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GRACE_SECONDS = 1.0  # past a call's deadline, for its own deadline handling to answer first

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_owner = (0, 0)  # (pid, thread id) of the running loop


def run(coro: Coroutine[Any, Any, T], deadline: float) -> T:
    """What `coro` returns or raises, run on this process's client loop; TimeoutError when it
    has not finished GRACE_SECONDS after `deadline` (time.monotonic())."""
    loop = _running()
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(max(0.0, deadline - time.monotonic()) + GRACE_SECONDS)
    except TimeoutError:
        future.cancel()
        raise


def _running() -> asyncio.AbstractEventLoop:
    global _loop, _owner
    with _lock:
        if _loop is None or _owner[0] != os.getpid():
            _loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_loop.run_forever, name="model-server-client", daemon=True
            )
            thread.start()
            _owner = (os.getpid(), thread.ident or 0)
        if _owner[1] == threading.get_ident():
            raise RuntimeError("a synchronous model server call from the client loop itself")
        return _loop
