"""api.grpc_calls: every gRPC call is counted in the plane's metrics, with its status."""

from __future__ import annotations

import grpc
from tensorflow_serving.apis import predict_pb2

from tfs_model_server.core.dataplane import DataPlane


def test_calls_are_counted_by_outcome(plane: DataPlane, prediction_stub, rpc_error) -> None:
    counts = plane.metrics.request_count
    before = counts.value("half_plus_two", "OK"), counts.value("half_plus_two", "INVALID_ARGUMENT")
    latency = plane.metrics.request_latency.count("half_plus_two", "predict", "GRPC")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    code, _ = rpc_error(prediction_stub.Predict, request)  # no inputs
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    after = counts.value("half_plus_two", "OK"), counts.value("half_plus_two", "INVALID_ARGUMENT")
    assert after == (before[0], before[1] + 1)
    assert plane.metrics.request_latency.count("half_plus_two", "predict", "GRPC") == latency
