"""Make a child process die with its parent (Linux: PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import ctypes
import signal

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Run in the child (subprocess.Popen's `preexec_fn`, Linux only): `signum` reaches it
    when its parent dies, even by SIGKILL.

    The kernel sends it when the *thread* that forked the child exits, so fork from a thread
    that lives as long as the parent means to; it reaches only the child, not what the child
    starts (serve's own children are swept by its watchdog instead)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
