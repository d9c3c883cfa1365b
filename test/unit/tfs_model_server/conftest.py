"""Real SavedModels and a data plane over them, built once for the model server's unit tests.

half_plus_two (version 123: y = 0.5x + 2) and half_plus_three (versions 123 and 124:
y = 0.5x + 3) are TF Serving's test models: a predict signature (x -> y), classify and regress
signatures over serialized tf.Examples with a float feature "x".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.core.manager import ModelConfig, ModelManager
from tfs_model_server.core.servable import Servable
from tfs_model_server.metrics import ServingMetrics


def _load(name: str, version: int, path: Path) -> Servable:
    """The server's loader without its options: a SavedModel version in its own Session."""
    return Servable(name, version, path)


def _model_config(name: str, base_path: Path, *, all_versions: bool = False) -> ModelConfig:
    config = ModelConfig(name=name, base_path=str(base_path), model_platform="tensorflow")
    if all_versions:
        config.model_version_policy.all.SetInParent()
    return config


@dataclass
class GrpcServer:
    """A running gRPC server: where to reach it, and what reloads it was asked for."""

    target: str
    socket_target: str
    reloads: list[Any]  # the configs HandleReloadConfigRequest passed on


@pytest.fixture(scope="session")
def model_root(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.getbasetemp() / "tfs-model-server-unit-models"
    if not (root / "half_plus_three" / "124").is_dir():
        em.half_plus_two_tf1(root / "half_plus_two", version=123)
        em.half_plus_three_tf1(root / "half_plus_three", versions=(123, 124))
    return root


@pytest.fixture(scope="session")
def plane(model_root: Path) -> Iterator[DataPlane]:
    """half_plus_two and half_plus_three (both versions, labels stable=123, canary=124)."""
    manager = ModelManager(_load, poll_wait_seconds=0)
    three = _model_config("half_plus_three", model_root / "half_plus_three", all_versions=True)
    three.version_labels["stable"] = 123
    three.version_labels["canary"] = 124
    configs = [_model_config("half_plus_two", model_root / "half_plus_two"), three]
    manager.set_config(configs)
    assert manager.wait_until_available([c.name for c in configs], timeout_s=60) == []
    manager.apply_labels(configs)
    yield DataPlane(manager, ServingMetrics())
    manager.close()


@pytest.fixture
def model_config() -> Callable[..., ModelConfig]:
    """model_config(name, base_path, all_versions=False): a TensorFlow model's config."""
    return _model_config


@pytest.fixture
def make_manager() -> Iterator[Callable[..., ModelManager]]:
    """make_manager(**options): ModelManagers that load real SavedModels, polled by hand
    (set_config() and poll()); all closed after the test."""
    managers: list[ModelManager] = []

    def make(**options: Any) -> ModelManager:
        managers.append(ModelManager(_load, poll_wait_seconds=0, **options))
        return managers[-1]

    yield make
    for made in managers:
        made.close()


@pytest.fixture(scope="module")
def grpc_server(plane: DataPlane, tmp_path_factory) -> Iterator[GrpcServer]:
    """Both gRPC services over `plane` on a free loopback port and a UNIX socket."""
    from process_utils import free_port
    from tfs_model_server.api.grpc_server import start_grpc_server

    port = free_port()
    socket_path = str(tmp_path_factory.mktemp("grpc") / "grpc.sock")
    reloads: list[Any] = []
    server = start_grpc_server(
        plane,
        reloads.append,
        port=port,
        socket_path=socket_path,
        max_threads=4,
        channel_arguments=[],
        host="127.0.0.1",
    )
    yield GrpcServer(f"127.0.0.1:{port}", f"unix:{socket_path}", reloads)
    server.stop(grace=None)


@pytest.fixture(scope="module")
def prediction_stub(grpc_server: GrpcServer) -> Iterator[Any]:
    """A PredictionService client of grpc_server."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(grpc_server.target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="module")
def model_stub(grpc_server: GrpcServer) -> Iterator[Any]:
    """A ModelService client of grpc_server."""
    import grpc
    from tensorflow_serving.apis import model_service_pb2_grpc

    with grpc.insecure_channel(grpc_server.target) as channel:
        yield model_service_pb2_grpc.ModelServiceStub(channel)


@pytest.fixture
def rpc_error() -> Callable[[Callable[..., Any], Any], tuple[Any, str]]:
    """rpc_error(method, request): the (grpc.StatusCode, details) the call fails with."""
    import grpc

    def failure(method: Callable[..., Any], request: Any) -> tuple[Any, str]:
        with pytest.raises(grpc.RpcError) as info:
            method(request, timeout=10)
        return info.value.code(), info.value.details()

    return failure
