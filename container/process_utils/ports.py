"""Free TCP ports on a local address, for processes started on loopback."""

from __future__ import annotations

import contextlib
import random
import socket

# below the kernel's ephemeral range (32768+ by default), so no client socket takes them
RANGE_LOW = 20000
RANGE_HIGH = 32000
_ATTEMPTS = 200


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel picks that is free on `host` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_port_range(count: int, host: str = "127.0.0.1") -> tuple[int, int]:
    """(low, high): `count` consecutive ports, all free on `host` right now, below the
    ephemeral range (a range the kernel cannot hand out to an outgoing connection meanwhile)."""
    for _ in range(_ATTEMPTS):
        low = random.randrange(RANGE_LOW, RANGE_HIGH - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(low, low + count):
                    stack.enter_context(socket.socket()).bind((host, port))
            except OSError:
                continue
            return low, low + count - 1
    raise RuntimeError(f"no {count} consecutive free ports on {host}")
