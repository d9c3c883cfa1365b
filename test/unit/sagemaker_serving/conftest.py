"""Real model servers for the unit tests of the model client, the service and the multi-model
API (tfs-model-server on free loopback ports, started once per session, always stopped), and
the service's falcon app on falcon's test client."""

from __future__ import annotations

import http.client
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import falcon.testing
import pytest

from conftest import model_server
from model_server_process import ModelServerProcess
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments import hidden as user_imports
from sagemaker_serving.environments.hidden import HiddenPackages
from sagemaker_serving.python_service import create_app
from sagemaker_serving.tfs_client import health

HALF_PLUS_TWO_VERSION = 123  # half_plus_two: y = 0.5x + 2
HALF_PLUS_THREE_VERSIONS = (123, 124)  # half_plus_three: y = 0.5x + 3, both served

CONFIG = """
model_config_list {{
  config {{ name: 'half_plus_two' base_path: '{root}/half_plus_two' model_platform: 'tensorflow' }}
  config {{
    name: 'half_plus_three' base_path: '{root}/half_plus_three' model_platform: 'tensorflow'
    model_version_policy {{ all {{}} }}
  }}
}}
"""


@pytest.fixture(scope="session")
def small_models(tmp_path_factory) -> Path:
    """half_plus_two and half_plus_three (TF Serving's test models), built once per session."""
    import example_models as em

    root = tmp_path_factory.getbasetemp() / "small-models"
    if not (root / "half_plus_three" / "124").is_dir():
        em.half_plus_two_tf1(root / "half_plus_two", version=HALF_PLUS_TWO_VERSION)
        em.half_plus_three_tf1(root / "half_plus_three", versions=HALF_PLUS_THREE_VERSIONS)
    return root


@pytest.fixture(scope="session")
def tfs_server(small_models, tmp_path_factory) -> Iterator[ModelServerProcess]:
    """A model server with half_plus_two and both versions of half_plus_three (never
    reconfigured: tests that load or unload models use `empty_tfs_server`)."""
    tmp = tmp_path_factory.mktemp("tfs-server")
    config = tmp / "models.config"
    config.write_text(CONFIG.format(root=small_models))
    args = [f"--model_config_file={config}"]
    with model_server(args, tmp / "server.log", ready_model="half_plus_three") as server:
        yield server


@pytest.fixture(scope="session")
def empty_tfs_server(tmp_path_factory) -> Iterator[ModelServerProcess]:
    """A model server started without models, as on a multi-model endpoint (it gets its
    models through ReloadConfig)."""
    tmp = tmp_path_factory.mktemp("empty-tfs-server")
    config = tmp / "models.config"
    config.write_text("model_config_list {}\n")
    args = [f"--model_config_file={config}", "--max_num_load_retries=0"]  # as serve starts it
    with model_server(args, tmp / "server.log") as server:
        deadline = time.monotonic() + 120
        while not answers(server):
            if time.monotonic() > deadline or not server.alive():
                pytest.fail(f"the model server did not start:\n{server.log()[-3000:]}")
            time.sleep(0.1)
        yield server


def answers(server: ModelServerProcess) -> bool:
    """True once the model server answers REST (a 404 for a model it does not have)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=2)
    return health.get(conn, health.model_path("none")) is not None


MakeApp = Callable[..., falcon.testing.TestClient]


@pytest.fixture
def make_app(tmp_path, monkeypatch) -> Iterator[MakeApp]:
    """`make_app(server=a model server or None, code=inference.py text or None, **fields of
    ServiceConfig)`: a test client of the service's app. User code is imported as the
    service does, with sys.path and sys.modules put back afterwards and nothing hidden from
    pytest's own imports."""
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "inference", raising=False)
    for name in ("code", "state", "models"):
        (tmp_path / name).mkdir(exist_ok=True)

    def make(server=None, code: str | None = None, **fields) -> falcon.testing.TestClient:
        if code is not None:
            (tmp_path / "code" / "inference.py").write_text(textwrap.dedent(code))
        rest, grpc = (server.rest_port, server.grpc_port) if server else (1, 2)
        defaults = {
            "code_dir": str(tmp_path / "code"),
            "default_model": "half_plus_two",
            "rest_ports": [rest],
            "grpc_ports": [grpc],
            "request_timeout_seconds": 10,
            "model_root": str(tmp_path / "models"),
            "state_dir": str(tmp_path / "state"),
            "load_timeout_seconds": 60,
        }
        return falcon.testing.TestClient(create_app(ServiceConfig(**{**defaults, **fields})))

    yield make
    sys.modules.pop("inference", None)
