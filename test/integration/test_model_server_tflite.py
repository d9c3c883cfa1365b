"""tfs-model-server with --prefer_tflite_model: a version's model.tflite served over REST and
gRPC, answering as the SavedModel it was converted from does (served by a second server
without the flag); a version with model.tflite alone; bad input; concurrent requests."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

import example_models as em
from conftest import model_server, serve_stack

CONFIG = """
model_config_list {{
  config {{ name: 'hp3' base_path: '{root}/hp3' model_platform: 'tensorflow' }}
  config {{ name: 'lite_only' base_path: '{root}/lite_only' model_platform: 'tensorflow' }}
}}
"""
ROW = {"instances": [1.0, 2.0, 5.0]}
COLUMNS = {"signature_name": "double", "inputs": {"m": [[1.0, 2.0], [3.5, -4.0]]}}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """hp3/1: saved_model.pb and its conversion model.tflite; lite_only/1: model.tflite alone."""
    root = tmp_path_factory.mktemp("tflite-models")
    em.half_plus_three_tflite(root / "hp3", 1)
    em.half_plus_three_tflite(root / "lite_only", 1, saved_model=False)
    return root


@pytest.fixture(scope="module")
def lite(models, tmp_path_factory):
    """Both models from model.tflite, two interpreters per version."""
    tmp = tmp_path_factory.mktemp("lite")
    config = tmp / "models.config"
    config.write_text(CONFIG.format(root=models))
    args = [f"--model_config_file={config}", "--prefer_tflite_model=true", "--num_tflite_pools=2"]
    with model_server(args, tmp / "server.log", ready_model="lite_only") as srv:
        assert srv.wait_ready(["hp3"], 60), srv.log()[-3000:]
        yield srv


@pytest.fixture(scope="module")
def saved(models, tmp_path_factory):
    """hp3 from its SavedModel (no flag: model.tflite is not read)."""
    tmp = tmp_path_factory.mktemp("saved")
    args = [f"--model_base_path={models}/hp3", "--model_name=hp3"]
    with model_server(args, tmp / "server.log", ready_model="hp3") as srv:
        yield srv


def post(server, path: str, body) -> requests.Response:
    return requests.post(f"{server.rest}{path}", data=json.dumps(body), timeout=30)


def stub(server) -> prediction_service_pb2_grpc.PredictionServiceStub:
    return prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(server.grpc_target)
    )


def predict_request(model: str, x, signature: str = "", name: str = "x", dtype=np.float32):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(x, dtype=dtype)))
    return request


def outputs_of(response) -> dict[str, np.ndarray]:
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def assert_close(got, want) -> None:
    """The same JSON structure, its numbers equal within float rounding."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            assert_close(got[key], want[key])
    elif isinstance(want, list) and want and isinstance(want[0], dict):
        assert isinstance(got, list) and len(got) == len(want)
        for one, other in zip(got, want, strict=True):
            assert_close(one, other)
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_rest_predict_row_and_columnar_answer_as_the_saved_model(lite, saved):
    for path, body in [
        ("/v1/models/hp3:predict", ROW),
        ("/v1/models/hp3:predict", {"inputs": {"x": [0.25, -8.0]}}),
        ("/v1/models/hp3:predict", {"signature_name": "double", "instances": [[1.0, 2.0]]}),
        ("/v1/models/hp3:predict", COLUMNS),
        ("/v1/models/hp3/versions/1:predict", {**COLUMNS, "output_filter": ["s"]}),
    ]:
        got, want = post(lite, path, body), post(saved, path, body)
        assert (got.status_code, want.status_code) == (200, 200), (got.text, want.text)
        assert_close(got.json(), want.json())
    assert post(lite, "/v1/models/hp3:predict", ROW).json() == {"predictions": [3.5, 4.0, 5.5]}
    assert post(lite, "/v1/models/lite_only:predict", ROW).json() == {
        "predictions": [3.5, 4.0, 5.5]
    }


def test_rest_metadata_and_status_answer_as_the_saved_model(lite, saved):
    got = requests.get(f"{lite.rest}/v1/models/hp3/metadata", timeout=10).json()
    want = requests.get(f"{saved.rest}/v1/models/hp3/metadata", timeout=10).json()
    assert got["model_spec"] == want["model_spec"]
    signatures = got["metadata"]["signature_def"]["signature_def"]
    assert sorted(signatures) == ["double", "serving_default"]
    wanted = want["metadata"]["signature_def"]["signature_def"]  # and __saved_model_init_op
    assert {k: wanted[k] for k in signatures} == signatures
    for server in (lite, saved):
        status = requests.get(f"{server.rest}/v1/models/hp3", timeout=10).json()
        assert status["model_version_status"] == [
            {
                "version": "1",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]


def test_grpc_predict_and_metadata_answer_as_the_saved_model(lite, saved):
    requests_ = [
        predict_request("hp3", [1.0, 2.0, 5.0]),
        predict_request("hp3", [[1.0, 2.0], [3.0, 4.0]], signature="double", name="m"),
    ]
    for request in requests_:
        got, want = stub(lite).Predict(request, 20), stub(saved).Predict(request, 20)
        assert got.model_spec == want.model_spec
        got_values, want_values = outputs_of(got), outputs_of(want)
        assert got_values.keys() == want_values.keys()
        for key in got_values:
            np.testing.assert_allclose(got_values[key], want_values[key], rtol=1e-6)
    meta = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    meta.model_spec.name = "hp3"
    maps = []
    for server in (lite, saved):
        answer = stub(server).GetModelMetadata(meta, 20)
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        answer.metadata["signature_def"].Unpack(sig_map)
        maps.append(sig_map.signature_def)
    for key in ("serving_default", "double"):
        assert maps[0][key] == maps[1][key]


def rpc_error(server, method: str, request) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub(server), method)(request, 20)
    return info.value.code(), info.value.details()


def test_bad_requests_are_invalid_arguments_as_for_the_saved_model(lite, saved):
    """Unknown signature, unknown input, a wrong type: TF Serving's texts, the SavedModel's."""
    bad = [
        predict_request("hp3", [1.0], signature="nope"),
        predict_request("hp3", [1.0], name="nope"),
        predict_request("hp3", [1, 2], dtype=np.int64),
    ]
    for request in bad:
        assert rpc_error(lite, "Predict", request) == rpc_error(saved, "Predict", request)
    codes = [rpc_error(lite, "Predict", request)[0] for request in bad]
    assert codes == [grpc.StatusCode.FAILED_PRECONDITION] + [grpc.StatusCode.INVALID_ARGUMENT] * 2
    assert rpc_error(lite, "Predict", bad[2])[1] == (
        "Expects arg[0] to be float but int64 is provided"
    )
    for body in [
        {"signature_name": "nope", "instances": [1.0]},
        {"inputs": {"nope": [1.0]}},
        {"instances": ["a"]},
    ]:
        got, want = (
            post(lite, "/v1/models/hp3:predict", body),
            post(saved, "/v1/models/hp3:predict", body),
        )
        assert (got.status_code, got.json()) == (want.status_code, want.json())
        assert got.status_code == 400


def test_a_shape_the_model_cannot_run_is_a_400_from_tflite(lite, saved):
    body = {"signature_name": "double", "instances": [1.0]}
    reply = post(lite, "/v1/models/hp3:predict", body)
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("TfLite: ")  # served from model.tflite
    assert "TfLite" not in post(saved, "/v1/models/hp3:predict", body).text  # its SavedModel
    request = predict_request("hp3", [1.0, 2.0], signature="double", name="m")
    code, details = rpc_error(lite, "Predict", request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "SUM" in details


def test_classify_answers_as_for_the_saved_model(lite, saved):
    """A converted predict signature has no `inputs` of serialized examples: TF Serving's
    classifier refuses it, for the TFLite model as for the SavedModel."""
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "hp3"
    request.input.example_list.examples.add().features.feature["x"].float_list.value.append(1.0)
    got = rpc_error(lite, "Classify", request)
    assert got == rpc_error(saved, "Classify", request)
    assert got[0] == grpc.StatusCode.INVALID_ARGUMENT
    body = {"examples": [{"x": 1.0}]}
    got_rest = post(lite, "/v1/models/hp3:regress", body)
    want_rest = post(saved, "/v1/models/hp3:regress", body)
    assert (got_rest.status_code, got_rest.json()) == (want_rest.status_code, want_rest.json())


def test_concurrent_requests_get_their_own_answers(lite):
    """8 clients x 20 gRPC and REST predictions of different sizes on 2 interpreters."""

    def client(worker: int) -> list[str]:
        wrong = []
        predictions = stub(lite)
        for i in range(20):
            x = np.full(1 + (worker + i) % 4, worker * 1000 + i, np.float32)
            if i % 2:
                y = np.asarray(
                    post(lite, "/v1/models/hp3:predict", {"instances": x.tolist()}).json()[
                        "predictions"
                    ]
                )
            else:
                y = outputs_of(predictions.Predict(predict_request("hp3", x), 20))["y"]
            if not np.array_equal(y, 0.5 * x + 3):
                wrong.append(f"{worker}/{i}: {y} for {x}")
        return wrong

    with ThreadPoolExecutor(8) as pool:
        assert [w for ws in pool.map(client, range(8)) for w in ws] == []


def test_the_sagemaker_stack_serves_model_tflite_with_the_flag(models, tmp_path):
    """serve with SAGEMAKER_TFS_MODEL_SERVER_FLAGS=--prefer_tflite_model=true: /invocations is
    answered from hp3's model.tflite (its TFLite error text says so)."""
    env = {"SAGEMAKER_TFS_MODEL_SERVER_FLAGS": "--prefer_tflite_model=true"}
    with serve_stack(models / "hp3", tmp_path, env) as server:
        url = f"{server.url}/invocations"
        reply = requests.post(url, json={"instances": [1.0, 2.0, 5.0]}, timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"predictions": [3.5, 4.0, 5.5]}
        bad = requests.post(url, json={"signature_name": "double", "instances": [1.0]}, timeout=30)
        assert bad.status_code == 400 and "TfLite: " in bad.text, bad.text
