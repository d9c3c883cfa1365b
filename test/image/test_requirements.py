"""A code/requirements.txt installed at start-up from PyPI through the machine's network, with
the host's CA bundle mounted and named by PIP_CERT: what a user behind a TLS-inspecting proxy
(as our machines are) must do, and what docs/image.md tells them."""

from __future__ import annotations

import os
from pathlib import Path

import requests
import user_code
from containers import running

TABULATE = "0.9.0"  # not in the image: only requirements.txt brings it


def host_ca_bundle() -> Path:
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("REQUESTS_CA_BUNDLE"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise AssertionError("no CA bundle on this machine")


def test_requirements_install_with_the_hosts_ca(engine, image, tmp_path):
    root = user_code.with_tabulate_requirement(tmp_path, TABULATE)
    volumes = {str(host_ca_bundle()): {"bind": "/run/host-ca.crt", "mode": "ro"}}
    env = {"PIP_CERT": "/run/host-ca.crt"}
    with running(engine, image, root, env=env, volumes=volumes) as container:
        reply = requests.post(
            f"{container.url}/invocations", data='{"instances": [1.0]}', timeout=60
        )
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"tabulate": TABULATE, "predictions": [3.5]}
        assert "requirements.txt" in container.logs()


PINNED_NUMPY = """
import json

import numpy


def input_handler(data, context):
    values = numpy.asarray(json.loads(data.read())["instances"], dtype=numpy.float32)
    return json.dumps({"instances": values.tolist()})


def output_handler(response, context):
    doc = response.json()
    doc["numpy"] = numpy.__version__
    return json.dumps(doc), "application/json"
"""


def test_a_pin_of_a_package_the_service_uses_runs_in_handler_processes(engine, image, tmp_path):
    """numpy==1.26.4 beside the image's numpy 2: an environment of its own and handler
    processes on its Python, as natively (environments/), as the image's non-root user."""
    root = user_code.half_plus_three(tmp_path)
    user_code.write(
        root, {"code/inference.py": PINNED_NUMPY, "code/requirements.txt": "numpy==1.26.4\n"}
    )
    volumes = {str(host_ca_bundle()): {"bind": "/run/host-ca.crt", "mode": "ro"}}
    env = {"PIP_CERT": "/run/host-ca.crt"}
    with running(engine, image, root, env=env, volumes=volumes) as container:
        for _ in range(4):  # each gunicorn worker, each handler process
            reply = requests.post(
                f"{container.url}/invocations", data='{"instances": [1.0, 2.0]}', timeout=60
            )
            assert reply.status_code == 200, reply.text
            assert reply.json() == {"predictions": [3.5, 4.0], "numpy": "1.26.4"}
        logs = container.logs()
        code, commands = container.exec("bash", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
        processes = container.processes()
    assert "it brings its own numpy" in logs, logs[-3000:]
    assert code == 0 and "sagemaker_serving.environments.host" in commands, commands
    assert all(uid == "1000" for _, _, uid in processes), processes
    assert "SIGSEGV" not in logs
