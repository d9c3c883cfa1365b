"""The built image, run as SageMaker runs it (`docker run IMAGE serve`), through the engine that
DOCKER_HOST names, with the Docker SDK for Python.

    make image && make image-test        # scripts/engine.sh sets DOCKER_HOST up
    pytest test/image --image REF        # another image

Not part of `make test`: these tests need a container engine and a built image, and fail (never
skip) without them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # containers, image_models, user_code

from containers import default_image  # noqa: E402


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--image",
        default=os.environ.get("SAGEMAKER_TFS_IMAGE"),
        help="the image to test (default: scripts/build.sh's cpu tag, as `make image` builds it)",
    )


@pytest.fixture(scope="session")
def engine():
    """A client of the engine DOCKER_HOST names; the session fails without one."""
    import docker

    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:
        pytest.fail(
            f"no container engine answers (DOCKER_HOST={os.environ.get('DOCKER_HOST')!r}): "
            f"{exc}. Run these tests with `make image-test`."
        )
    return client


@pytest.fixture(scope="session")
def image(request, engine) -> str:
    """The reference of the image under test; the session fails when it is not built."""
    import docker

    reference = request.config.getoption("--image")
    reference = reference or default_image()
    try:
        engine.images.get(reference)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{reference} is not built: `make image` builds it")
    return reference


@pytest.fixture(scope="session")
def model_server(engine, image) -> str:
    """tensorflow_model_server or tfs-model-server: what the image runs (its label)."""
    return engine.images.get(image).labels["com.amazonaws.sagemaker.tfs.model-server"]
