"""The front port: refused at once when taken, and nginx seen listening on it."""

from __future__ import annotations

import os
import socket

import pytest

from process_utils import free_port
from sagemaker_serving.launcher.front_port import FrontPortError, check_front_port, listening


def test_a_taken_port_is_refused_naming_it_and_the_setting():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(FrontPortError, match=f"port {port} .*SAGEMAKER_BIND_TO_PORT"):
            check_front_port("127.0.0.1", port)
        with pytest.raises(FrontPortError, match=f"port {port}"):
            check_front_port("", port)  # every address: the loopback one too


def test_a_free_port_passes_and_stays_free():
    port = free_port()
    check_front_port("127.0.0.1", port)
    with socket.socket() as after:
        after.bind(("127.0.0.1", port))  # the probe let it go


def test_listening_is_seen_on_the_process_that_holds_the_socket():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert not listening(os.getpid(), port)  # bound, not yet listening
        sock.listen()
        assert listening(os.getpid(), port)
        assert not listening(os.getpid(), free_port())
    assert not listening(None, port)
