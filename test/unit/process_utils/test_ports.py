"""process_utils.ports: free loopback ports, one or a consecutive range."""

from __future__ import annotations

import socket

from process_utils import free_port, free_port_range, ports
from process_utils.ports import RANGE_HIGH, RANGE_LOW


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_free_port_range_is_consecutive_free_and_below_the_ephemeral_ports():
    low, high = free_port_range(7)
    assert high - low == 6
    assert low >= RANGE_LOW and high < RANGE_HIGH
    sockets = [socket.socket() for _ in range(low, high + 1)]
    try:
        for sock, port in zip(sockets, range(low, high + 1), strict=True):
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in sockets:
            sock.close()


def test_a_block_with_a_taken_port_is_passed_over(monkeypatch):
    low, _ = free_port_range(10)
    tries = iter([low, low + 3])
    monkeypatch.setattr(ports.random, "randrange", lambda *_: next(tries))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", low + 2))
        assert free_port_range(3) == (low + 3, low + 5)
