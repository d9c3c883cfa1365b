"""tfs-model-server over gRPC, through the tensorflow-serving-api stubs."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from tensorflow_serving.config import model_server_config_pb2

from conftest import model_server


def example(x: float) -> tf.train.Example:
    return tf.train.Example(
        features=tf.train.Features(
            feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[x]))}
        )
    )


@pytest.fixture(scope="module")
def server(model_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpc")
    socket_path = tmp / "grpc.sock"
    with model_server(
        [
            f"--model_base_path={model_root}/half_plus_two",
            "--model_name=hp2",
            f"--grpc_socket_path={socket_path}",
        ],
        tmp / "server.log",
        ready_model="hp2",
    ) as srv:
        srv.socket_path = socket_path
        yield srv


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.grpc_target) as ch:
        yield ch


@pytest.fixture(scope="module")
def predictions(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="module")
def signatures(predictions):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "hp2"
    response = predictions.GetModelMetadata(request, timeout=10)
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(sig_map)
    assert response.model_spec.version.value == 123
    return sig_map.signature_def


def test_predict(predictions):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "hp2"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0, 2.0, 5.0], np.float32)))
    response = predictions.Predict(request, timeout=10)
    assert response.model_spec.name == "hp2"
    assert response.model_spec.version.value == 123
    assert response.model_spec.signature_name == "serving_default"
    assert list(tf.make_ndarray(response.outputs["y"])) == [2.5, 3.0, 4.5]
    assert list(response.outputs["y"].float_val) == [2.5, 3.0, 4.5]  # AsProtoField, as TF Serving


def test_predict_unknown_model_and_bad_input(predictions):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "nope"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([1.0]))
    with pytest.raises(grpc.RpcError) as err:
        predictions.Predict(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    request.model_spec.name = "hp2"
    del request.inputs["x"]
    request.inputs["z"].CopyFrom(tf.make_tensor_proto([1.0]))
    with pytest.raises(grpc.RpcError) as err:
        predictions.Predict(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_classify_regress_multi_inference(predictions, signatures):
    classify = next(
        k for k, v in signatures.items() if v.method_name == "tensorflow/serving/classify"
    )
    regress = "regress_x_to_y"
    assert signatures[regress].method_name == "tensorflow/serving/regress"
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = "hp2", classify
    request.input.example_list.examples.extend([example(1.0), example(2.0)])
    response = predictions.Classify(request, timeout=10)
    assert len(response.result.classifications) == 2

    request = regression_pb2.RegressionRequest()
    request.model_spec.name, request.model_spec.signature_name = "hp2", regress
    request.input.example_list.examples.extend([example(1.0), example(2.0)])
    response = predictions.Regress(request, timeout=10)
    assert [r.value for r in response.result.regressions] == [2.5, 3.0]

    request = inference_pb2.MultiInferenceRequest()
    for sig, method in (
        (classify, "tensorflow/serving/classify"),
        (regress, "tensorflow/serving/regress"),
    ):
        task = request.tasks.add(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = "hp2", sig
    request.input.example_list.examples.extend([example(4.0)])
    response = predictions.MultiInference(request, timeout=10)
    assert len(response.results) == 2
    assert response.results[1].regression_result.regressions[0].value == 4.0


def test_model_status_and_unix_socket(server):
    with grpc.insecure_channel(f"unix:{server.socket_path}") as ch:
        stub = model_service_pb2_grpc.ModelServiceStub(ch)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "hp2"
        response = stub.GetModelStatus(request, timeout=10)
    (status,) = response.model_version_status
    assert status.version == 123
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE


def test_reload_config_adds_and_removes_models(channel, predictions, model_root):
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    config = model_server_config_pb2.ModelServerConfig()
    for name, path in (("hp2", "half_plus_two"), ("hp3", "half_plus_three")):
        config.model_config_list.config.add(
            name=name, base_path=str(model_root / path), model_platform="tensorflow"
        )
    request = model_management_pb2.ReloadConfigRequest(config=config)
    response = stub.HandleReloadConfigRequest(request, timeout=120)
    assert response.status.error_code == 0, response.status.error_message

    predict = predict_pb2.PredictRequest()
    predict.model_spec.name = "hp3"
    predict.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([2.0], np.float32)))
    assert list(tf.make_ndarray(predictions.Predict(predict, timeout=10).outputs["y"])) == [4.0]

    del config.model_config_list.config[1]
    response = stub.HandleReloadConfigRequest(
        model_management_pb2.ReloadConfigRequest(config=config), timeout=120
    )
    assert response.status.error_code == 0
    with pytest.raises(grpc.RpcError) as err:
        predictions.Predict(predict, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    bad = model_server_config_pb2.ModelServerConfig()
    bad.model_config_list.config.add(
        name="hp2", base_path=str(model_root / "half_plus_two"), model_platform="tensorflow"
    )
    bad.model_config_list.config.add(
        name="broken", base_path="relative/path", model_platform="tensorflow"
    )
    with pytest.raises(grpc.RpcError) as failed:  # a failed reload is a failed call, as in TF
        stub.HandleReloadConfigRequest(
            model_management_pb2.ReloadConfigRequest(config=bad), timeout=30
        )
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_no_health_service_unless_asked(channel):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with pytest.raises(grpc.RpcError) as info:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_health_service_as_tf_serving_enables_it(model_root, tmp_path):
    """--enable_grpc_healthcheck_service: the server and both services SERVING, others unknown;
    a watcher sees NOT_SERVING when the server shuts down."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    serving = health_pb2.HealthCheckResponse.SERVING
    with (
        model_server(
            [
                f"--model_base_path={model_root}/half_plus_two",
                "--model_name=hp2",
                "--enable_grpc_healthcheck_service",
            ],
            tmp_path / "server.log",
            ready_model="hp2",
        ) as server,
        grpc.insecure_channel(server.grpc_target) as ch,
    ):
        health = health_pb2_grpc.HealthStub(ch)
        for name in ("", "ModelService", "PredictionService"):
            request = health_pb2.HealthCheckRequest(service=name)
            assert health.Check(request, timeout=10).status == serving
        with pytest.raises(grpc.RpcError) as info:
            health.Check(health_pb2.HealthCheckRequest(service="Nope"), timeout=10)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == serving
        server.stop()
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
