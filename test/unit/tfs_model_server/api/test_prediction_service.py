"""api.prediction_service over a real gRPC server and data plane (half_plus_two: y = 0.5x + 2):
Predict, Classify, Regress, MultiInference and GetModelMetadata, and their error statuses."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)


def addressed(request: Any, name: str, signature_name: str = "") -> Any:
    """request with its model_spec naming the model (and signature)."""
    request.model_spec.name = name
    request.model_spec.signature_name = signature_name
    return request


def _examples(request, *xs: float) -> None:
    for x in xs:
        example = request.input.example_list.examples.add()
        example.features.feature["x"].float_list.value.append(x)


def test_predict(prediction_stub) -> None:
    request = addressed(predict_pb2.PredictRequest(), "half_plus_two")
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([[1.0], [3.0]], np.float32)))
    response = prediction_stub.Predict(request, timeout=10)
    assert tf.make_ndarray(response.outputs["y"]).tolist() == [[2.5], [3.5]]
    assert (response.model_spec.version.value, response.model_spec.signature_name) == (
        123,
        "serving_default",
    )


def test_classify(prediction_stub) -> None:
    request = addressed(
        classification_pb2.ClassificationRequest(), "half_plus_two", "classify_x_to_y"
    )
    _examples(request, 2.0, 4.0)
    response = prediction_stub.Classify(request, timeout=10)
    assert [[c.score for c in row.classes] for row in response.result.classifications] == [
        [3.0],
        [4.0],
    ]
    assert response.model_spec.signature_name == "classify_x_to_y"


def test_regress(prediction_stub) -> None:
    request = addressed(regression_pb2.RegressionRequest(), "half_plus_two", "regress_x_to_y")
    _examples(request, 2.0)
    response = prediction_stub.Regress(request, timeout=10)
    assert [r.value for r in response.result.regressions] == [3.0]


@pytest.mark.parametrize(
    ("method", "request_", "code", "details"),
    [
        (
            "Predict",
            addressed(predict_pb2.PredictRequest(), "nope"),
            grpc.StatusCode.NOT_FOUND,
            "Servable not found for request: Latest(nope)",
        ),
        (
            "Regress",
            addressed(regression_pb2.RegressionRequest(), "half_plus_two", "regress_x_to_y"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "Input is empty.",
        ),
    ],
)
def test_errors_carry_their_status_code(
    prediction_stub, rpc_error, method, request_, code, details
):
    assert rpc_error(getattr(prediction_stub, method), request_) == (code, details)


def test_multi_inference(prediction_stub) -> None:
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("classify_x_to_y", "classify"), ("regress_x_to_y2", "regress")):
        task = request.tasks.add(method_name=f"tensorflow/serving/{method}")
        task.model_spec.name = "half_plus_two"
        task.model_spec.signature_name = signature
    _examples(request, 2.0)
    classified, regressed = prediction_stub.MultiInference(request, timeout=10).results
    assert classified.classification_result.classifications[0].classes[0].score == 3.0
    assert regressed.regression_result.regressions[0].value == 4.0
    assert regressed.model_spec.signature_name == "regress_x_to_y2"


def test_get_model_metadata(prediction_stub) -> None:
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "half_plus_three"
    request.model_spec.version_label = "stable"
    response = prediction_stub.GetModelMetadata(request, timeout=10)
    assert response.model_spec.version.value == 123
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signatures)
    assert "regress_x_to_y" in signatures.signature_def
