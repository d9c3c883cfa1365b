"""scripts/publish.sh against a real registry (Debian's docker-registry on a free loopback port):
the image goes up, every layer is there, it comes back by digest and answers /ping. Only the
ECR login (`aws ecr get-login-password`) is left untested."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import docker
import pytest
import requests
import user_code
from containers import REPO, running

from process_utils import free_port_range, terminate

MANIFESTS = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)


@pytest.fixture
def registry(tmp_path) -> Iterator[str]:
    """docker-registry serving `host:port` (plain HTTP on the loopback), always stopped."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed (make image-test installs it)")
    port, _ = free_port_range(1)
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {tmp_path / 'storage'}}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    log = open(tmp_path / "registry.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"http://{address}/v2/", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"docker-registry did not start:\n{(tmp_path / 'registry.log').read_text()}"
                )
            time.sleep(0.2)
        yield address
    finally:
        terminate(proc, 10)
        log.close()


def pull(reference: str) -> None:
    """The engine's own pull (its CLI: podman needs --tls-verify=false for plain HTTP)."""
    engine = os.environ.get("ENGINE", "docker")
    command = [engine, "pull", reference]
    if engine == "podman":
        command.insert(2, "--tls-verify=false")
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_publish_pull_by_digest_and_run(engine, image, registry, tmp_path):
    result = subprocess.run(
        [str(REPO / "scripts" / "publish.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={
            **os.environ,
            "IMAGE": image,
            "REGISTRY": registry,
            "REGISTRY_TLS_VERIFY": "false",
            "REPOSITORY": "team/sagemaker-tfs",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    reference = result.stdout.splitlines()[-1]
    name, _, digest = reference.partition("@")
    assert name == f"{registry}/team/sagemaker-tfs" and digest.startswith("sha256:"), reference

    # the registry holds the manifest under that digest, and every layer it names
    manifest = requests.get(
        f"http://{registry}/v2/team/sagemaker-tfs/manifests/{digest}",
        headers={"Accept": MANIFESTS},
        timeout=30,
    )
    assert manifest.status_code == 200, manifest.text
    assert manifest.headers["Docker-Content-Digest"] == digest
    layers = manifest.json()["layers"]
    local = engine.images.get(image)
    assert len(layers) == len(local.attrs["RootFS"]["Layers"])
    for layer in layers:
        blob = requests.head(
            f"http://{registry}/v2/team/sagemaker-tfs/blobs/{layer['digest']}", timeout=30
        )
        assert blob.status_code == 200, layer

    # pulled back by digest: the same image (its config digest is its ID), and it serves
    engine.images.remove(f"{registry}/team/sagemaker-tfs:{image.rsplit(':', 1)[1]}")
    pull(reference)
    try:
        assert engine.images.get(reference).id == local.id
        root = user_code.half_plus_three(tmp_path / "model")
        with running(engine, reference, root) as container:
            assert requests.get(f"{container.url}/ping", timeout=2).status_code == 200
            reply = requests.post(
                f"{container.url}/invocations", data='{"instances": [1.0]}', timeout=60
            )
            assert reply.json() == {"predictions": [3.5]}
    finally:  # the pulled name only: the image itself stays
        with contextlib.suppress(docker.errors.APIError):
            engine.images.remove(reference)
