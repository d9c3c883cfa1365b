"""api.model_service over a real gRPC server: GetModelStatus and HandleReloadConfigRequest."""

from __future__ import annotations

import grpc
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
)

from process_utils import free_port
from tfs_model_server.api.grpc_server import start_grpc_server
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.metrics import ServingMetrics


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


def test_reload_takes_only_a_model_config_list_and_fails_the_call_otherwise(
    model_stub, rpc_error
) -> None:
    """model_service_impl.cc returns the reload's status as the call's (ToGRPCStatus)."""
    custom = model_management_pb2.ReloadConfigRequest()
    custom.config.custom_model_config.Pack(custom.config)
    for request in (custom, model_management_pb2.ReloadConfigRequest()):
        assert rpc_error(model_stub.HandleReloadConfigRequest, request) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
            "ModelConfigList is currently supported",
        )


def test_reload_answers_how_much_each_named_metric_grew(plane) -> None:
    """A counter's first point (by label values) before and after; 0 for other names."""
    metrics = ServingMetrics()
    counter = metrics.load_attempt_count
    counter.inc("/b", "success")
    port = free_port()
    server = start_grpc_server(
        DataPlane(plane.manager, metrics),
        lambda config: counter.inc("/a", "success", amount=3),  # the first point from now on
        port=port,
        socket_path="",
        max_threads=2,
        channel_arguments=[],
        host="127.0.0.1",
    )
    request = model_management_pb2.ReloadConfigRequest(
        metric_names=["/tensorflow/cc/saved_model/load_attempt_count", "/no/such/metric"]
    )
    request.config.model_config_list.SetInParent()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            response = stub.HandleReloadConfigRequest(request, timeout=10)
    finally:
        server.stop(grace=None)
    assert [(m.name, m.int64_value_increase) for m in response.metric] == [
        ("/tensorflow/cc/saved_model/load_attempt_count", 2),  # first point 1, then 3
        ("/no/such/metric", 0),
    ]
