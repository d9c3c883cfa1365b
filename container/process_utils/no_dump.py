"""Keep a process's memory (the run's secret) from other processes: not dumpable.

A process that is not dumpable cannot be read through /proc/<pid>/mem or ptrace by any process
without CAP_SYS_PTRACE, not even one of its own user, and writes no core dump.

- `make_non_dumpable()`: this process (serve, the Python service: Linux keeps the flag across
  fork, so gunicorn's workers inherit it).
- nginx sets its workers dumpable again after they change user (`prctl(PR_SET_DUMPABLE, 1)` in
  ngx_worker_process_init), so any other process of that user (`nobody` when serve runs as
  root) could read the secret out of them. `python -m process_utils.no_dump PROGRAM ARGS...`
  execs PROGRAM under a seccomp filter that turns that call into a no-op: a worker keeps the
  non-dumpable state the kernel gives it when it changes user.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import struct
import sys

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000  # with errno 0: the call returns 0 and does nothing

# (audit architecture, prctl's syscall number) by machine
_ARCHES = {"x86_64": (0xC000003E, 157), "aarch64": (0xC00000B7, 167)}

# classic BPF
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]: its low half)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    """prctl(option, arg2, arg3, 0, 0): every argument given (some options refuse others
    than 0 in the unused ones)."""
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    result = int(libc.prctl(option, arg2, arg3, 0, 0))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


def make_non_dumpable() -> None:
    """This process (and what it forks) is no longer dumpable."""
    try:
        _prctl(PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError) as exc:  # not Linux: nothing to keep
        log.warning("could not make process %d non-dumpable: %s", os.getpid(), exc)


def is_dumpable() -> bool:
    return _prctl(PR_GET_DUMPABLE) != 0


def _filter_program(arch: int, prctl_nr: int) -> bytes:
    """seccomp: prctl(PR_SET_DUMPABLE, ...) returns 0 without effect; all else is allowed."""

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    return b"".join(
        [
            op(_LD_W_ABS, 0, 0, _ARCH),
            op(_JEQ_K, 0, 5, arch),  # another ABI: allow
            op(_LD_W_ABS, 0, 0, _NR),
            op(_JEQ_K, 0, 3, prctl_nr),
            op(_LD_W_ABS, 0, 0, _ARG0),
            op(_JEQ_K, 0, 1, PR_SET_DUMPABLE),
            op(_RET_K, 0, 0, SECCOMP_RET_ERRNO),
            op(_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        ]
    )


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def forbid_dumpable() -> bool:
    """From now on (exec included), prctl(PR_SET_DUMPABLE) does nothing in this process and
    its children. False (with a log line) where the filter cannot be installed."""
    machine = platform.machine()
    if machine not in _ARCHES:
        log.warning("no seccomp filter for %s: nginx's workers stay dumpable", machine)
        return False
    program = _filter_program(*_ARCHES[machine])
    buffer = ctypes.create_string_buffer(program)
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # what an unprivileged filter needs
        _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
    except (OSError, AttributeError) as exc:
        log.warning("no seccomp filter (%s): nginx's workers stay dumpable", exc)
        return False
    return True


def command(argv: list[str]) -> list[str]:
    """`argv` run under forbid_dumpable (this module as its launcher)."""
    return [sys.executable, "-m", "process_utils.no_dump", *argv]


def main() -> None:
    """`python -m process_utils.no_dump PROGRAM ARGS...`: exec PROGRAM under the filter."""
    if len(sys.argv) < 2:
        sys.exit("usage: python -m process_utils.no_dump PROGRAM [ARGS...]")
    logging.basicConfig(format="%(message)s")
    forbid_dumpable()
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
