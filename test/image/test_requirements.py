"""A code/requirements.txt installed at start-up from PyPI through the machine's network, with
the host's CA bundle mounted and named by PIP_CERT: what a user behind a TLS-inspecting proxy
(as our machines are) must do, and what README's "Build and run the image" tells them."""

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
