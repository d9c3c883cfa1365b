"""The built image, run as SageMaker runs it (`docker run IMAGE serve`), on half_plus_three.

    pytest test/integration/test_docker_image.py --docker-image sagemaker-tfs:0.1.0-cpu

Without --docker-image, or without a reachable Docker engine, every test here skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from conftest import docker_client, docker_serve

LABELS = (
    "com.amazonaws.sagemaker.capabilities.accept-bind-to-port",
    "com.amazonaws.sagemaker.capabilities.multi-models",
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("opt_ml_model")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1, 2))
    return root


@pytest.fixture(scope="module")
def container(docker_image, model_dir):
    with docker_serve(docker_image, model_dir) as server:
        yield server


def test_labels_declare_sagemaker_capabilities(docker_image):
    labels = docker_client().images.get(docker_image).labels
    for label in LABELS:
        assert labels.get(label) == "true", labels


def test_ping_is_200_with_an_empty_body(container):
    reply = requests.get(f"{container.url}/ping", timeout=2)
    assert reply.status_code == 200
    assert reply.content == b""


def test_invocations_json(container):
    reply = requests.post(
        f"{container.url}/invocations", json={"instances": [1.0, 2.0, 5.0]}, timeout=30
    )
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [3.5, 4.0, 5.5]}


def test_invocations_csv_with_custom_attributes(container):
    reply = requests.post(
        f"{container.url}/invocations",
        data=b"1.0\n2.0\n",
        headers={
            "Content-Type": "text/csv",
            "Accept": "text/csv",
            "X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=1",
        },
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    assert reply.text.split() == ["3.5", "4"]


def test_sigterm_stops_serve_cleanly(docker_image, model_dir):
    """serve is PID 1 and receives SIGTERM itself: exit 0 well before the 30 s SIGKILL."""
    import time

    with docker_serve(docker_image, model_dir) as server:
        started = time.monotonic()
        code = server.stop(timeout=30)
        elapsed = time.monotonic() - started
    assert code == 0, server.logs()[-3000:]
    assert elapsed < 29, f"stopped after {elapsed:.1f}s: SIGTERM did not reach serve"


# Every TCP socket listening in the container, from /proc/net (no tool needed in the image).
LISTENERS = r"""
import socket, struct
for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
    for line in open(f"/proc/net/{name}").read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state != "0A":  # LISTEN
            continue
        address, port = local.split(":")
        raw = bytes.fromhex(address)
        if family == socket.AF_INET:
            raw = struct.pack("<I", *struct.unpack(">I", raw))
        else:
            words = struct.unpack(">4I", raw)
            raw = struct.pack("<4I", *words)
        print(socket.inet_ntop(family, raw), int(port, 16))
"""


def test_only_the_front_port_listens_beyond_the_loopback(container):
    """The model servers' gRPC and REST ports (the real binary binds every interface; serve
    preloads loopback_bind.so) are reachable from inside the container only."""
    import ipaddress

    result = container.container.exec_run(["python3", "-c", LISTENERS])
    assert result.exit_code == 0, result.output
    listening = [line.split() for line in result.output.decode().splitlines()]
    assert len(listening) >= 3, listening  # nginx, and a model server's gRPC and REST ports
    for address, port in listening:
        ip = ipaddress.ip_address(address)
        loopback = (getattr(ip, "ipv4_mapped", None) or ip).is_loopback
        assert loopback or port == "8080", (address, port)
