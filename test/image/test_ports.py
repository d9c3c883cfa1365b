"""SAGEMAKER_BIND_TO_PORT and SAGEMAKER_SAFE_PORT_RANGE as SageMaker sets them on a
multi-container endpoint or an inference pipeline: the containers share one network namespace,
each listens on the port it is given and takes every other port from its own range."""

from __future__ import annotations

import requests
import user_code
from containers import Container, is_loopback, running

FIRST = {"SAGEMAKER_BIND_TO_PORT": "9080", "SAGEMAKER_SAFE_PORT_RANGE": "20000-20099"}
SECOND = {"SAGEMAKER_BIND_TO_PORT": "9081", "SAGEMAKER_SAFE_PORT_RANGE": "20100-20199"}


def in_range(port: int, env: dict[str, str]) -> bool:
    low, high = (int(p) for p in env["SAGEMAKER_SAFE_PORT_RANGE"].split("-"))
    return low <= port <= high


def test_two_containers_in_one_network_namespace(engine, image, tmp_path):
    root = user_code.half_plus_three(tmp_path)
    with running(engine, image, root, env=FIRST, front_ports=(9080, 9081)) as first:
        second = Container(
            engine, image, root, env=SECOND, network_mode=f"container:{first.container.id}"
        )
        try:
            second.wait_ready(url=first.url_of(9081))
            for port, expected in ((9080, [3.5]), (9081, [3.5])):
                reply = requests.post(
                    f"{first.url_of(port)}/invocations",
                    data='{"instances": [1.0]}',
                    headers={"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=1"},
                    timeout=60,
                )
                assert reply.status_code == 200, reply.text
                assert reply.json() == {"predictions": expected}
            # both containers' sockets, seen from the shared namespace
            listening = first.listening()
        finally:
            second.remove()
    fronts = sorted(port for proto, address, port in listening if not is_loopback(address))
    assert fronts == [9080, 9081], listening
    # TCP listeners (the model servers' gRPC and REST ports) come from the ranges; a UDP socket
    # the kernel numbers (the Python service's metrics socket, on the loopback) cannot collide
    others = [port for proto, address, port in listening if is_loopback(address) and proto == "tcp"]
    assert others, listening
    assert all(in_range(port, FIRST) or in_range(port, SECOND) for port in others), listening
    assert any(in_range(port, FIRST) for port in others), listening
    assert any(in_range(port, SECOND) for port in others), listening
    assert 8080 not in [port for _, _, port in listening]
