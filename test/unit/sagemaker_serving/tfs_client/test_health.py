"""Is a model server up, is a model AVAILABLE: the answers' reading, and real servers."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from sagemaker_serving.tfs_client import health


def status(*items: tuple[str, str]) -> str:
    return json.dumps(
        {"model_version_status": [{"version": v, "state": s, "status": {}} for v, s in items]}
    )


def test_version_states_reads_tf_servings_status_answer():
    assert health.version_states(status(("2", "AVAILABLE"), ("1", "END"))) == {
        2: "AVAILABLE",
        1: "END",
    }
    assert health.version_states(b"{}") == {}


@pytest.mark.parametrize(
    ("states", "versions", "expected"),
    [
        ({1: "AVAILABLE", 2: "AVAILABLE"}, None, True),
        ({1: "AVAILABLE", 2: "LOADING"}, None, False),
        ({}, None, False),
        ({1: "AVAILABLE", 2: "LOADING"}, (1,), True),
        ({1: "AVAILABLE"}, (1, 2), False),
        ({1: "END"}, (1,), False),
    ],
)
def test_all_available(states, versions, expected):
    assert health.all_available(states, versions) is expected


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_instance_ready_with_models_when_each_is_available(tfs_server):
    assert health.instance_ready(tfs_server.rest_port, ["half_plus_three"])
    assert health.instance_ready(tfs_server.rest_port, ["half_plus_three", "half_plus_two"])
    assert not health.instance_ready(tfs_server.rest_port, ["half_plus_three", "no_such_model"])
    assert not health.instance_ready(closed_port(), ["half_plus_three"])


@pytest.fixture
def html_404_port() -> Iterator[int]:
    """A web server that is no model server: a 404 HTML page for every path."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield server.server_address[1]
        server.shutdown()


def test_instance_ready_without_models_when_it_answers_a_status_request(tfs_server, html_404_port):
    # a status answer, even its JSON 404 for a model it does not serve, says the instance is up
    assert health.instance_ready(tfs_server.rest_port)
    assert not health.instance_ready(closed_port())
    assert not health.instance_ready(html_404_port)  # not a model server's answer
    conn = http.client.HTTPConnection("127.0.0.1", tfs_server.rest_port, timeout=2)
    assert health.get(conn, "/v1/models/no_such_model")[0] == 404  # type: ignore[index]
    assert health.get(http.client.HTTPConnection("127.0.0.1", closed_port()), "/") is None


def test_instance_watch_knows_at_once_whether_every_instance_is_up(tfs_server):
    """A multi-model /ping asks the watch, which knows without asking the model servers now:
    up while the status is answered, down at once when refused, down when a probe hangs."""
    watch = health.InstanceWatch([tfs_server.rest_port], every=0.05, timeout=0.5)
    assert watch.problem(wait=10) is None
    down = health.InstanceWatch([tfs_server.rest_port, closed_port()], every=0.05, timeout=0.5)
    assert down.problem(wait=10) == "model server instance 1 is not answering"
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        hung = health.InstanceWatch([silent.getsockname()[1]], every=0.05, timeout=0.5)
        deadline = time.monotonic() + 30
        while hung.problem(wait=10) is None or "has not answered yet" in hung.problem():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert hung.problem() == "model server instance 0 is not answering"


def test_refused_knows_at_once_that_an_instance_is_gone(tfs_server):
    """/ping's own check: the kernel's listening ports, no wait for the next round of probes."""
    up = health.InstanceWatch([tfs_server.rest_port])
    assert up.refused() is None
    down = health.InstanceWatch([tfs_server.rest_port, closed_port()])
    assert down.refused() == "model server instance 1 is not listening"
    assert tfs_server.rest_port in (health.listening_ports() or set())
