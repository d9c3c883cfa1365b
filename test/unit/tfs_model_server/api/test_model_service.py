"""api.model_service over a real gRPC server: GetModelStatus and HandleReloadConfigRequest."""

from __future__ import annotations

import grpc
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
)


def test_get_model_status(model_stub, rpc_error) -> None:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "half_plus_three"
    response = model_stub.GetModelStatus(request, timeout=10)
    assert [(s.version, s.state) for s in response.model_version_status] == [(124, 30), (123, 30)]
    request.model_spec.name = "nope"
    assert rpc_error(model_stub.GetModelStatus, request) == (
        grpc.StatusCode.NOT_FOUND,
        "Could not find any versions of model nope",
    )


def test_reload_passes_a_model_config_list_on(model_stub, grpc_server) -> None:
    request = model_management_pb2.ReloadConfigRequest()
    request.config.model_config_list.config.add(name="m", base_path="/m")
    response = model_stub.HandleReloadConfigRequest(request, timeout=10)
    assert response.status.error_code == 0
    assert grpc_server.reloads[-1] == request.config


def test_reload_takes_only_a_model_config_list(model_stub) -> None:
    request = model_management_pb2.ReloadConfigRequest()
    request.config.custom_model_config.Pack(request.config)
    response = model_stub.HandleReloadConfigRequest(request, timeout=10)
    assert (response.status.error_code, response.status.error_message) == (
        3,
        "ServerCore::HandleReloadConfigRequest only supports reloading model_config_list configs.",
    )
