"""Server-side batching through the real server: every caller gets exactly its own rows."""

from __future__ import annotations

import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import VENV_BIN, model_server

BATCHING = """
max_batch_size { value: 8 }
batch_timeout_micros { value: 20000 }
num_batch_threads { value: 2 }
max_enqueued_batches { value: 100 }
allowed_batch_sizes: 4
allowed_batch_sizes: 8
pad_variable_length_inputs: true
"""

CONFIG = """
model_config_list {{
  config {{ name: 'hp2' base_path: '{root}/half_plus_two' model_platform: 'tensorflow' }}
  config {{ name: 'var' base_path: '{root}/variable_length' model_platform: 'tensorflow' }}
  config {{ name: 'multi_io' base_path: '{root}/multi_io' model_platform: 'tensorflow' }}
}}
"""


@pytest.fixture(scope="module")
def server(model_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batching")
    (tmp / "batching.config").write_text(BATCHING)
    (tmp / "models.config").write_text(CONFIG.format(root=model_root))
    args = [
        f"--model_config_file={tmp / 'models.config'}",
        "--enable_batching",
        f"--batching_parameters_file={tmp / 'batching.config'}",
    ]
    with model_server(args, tmp / "server.log", ready_model="multi_io") as srv:
        yield srv


def test_concurrent_rest_calls_get_their_own_rows(server):
    def call(i: int) -> tuple[int, list]:
        rows = [float(i * 10 + k) for k in range(1 + i % 3)]
        reply = requests.post(
            f"{server.rest}/v1/models/hp2:predict", json={"instances": rows}, timeout=30
        )
        assert reply.status_code == 200, reply.text
        return i, reply.json()["predictions"]

    with ThreadPoolExecutor(16) as pool:
        for i, predictions in pool.map(call, range(160)):
            assert predictions == [0.5 * (i * 10 + k) + 2 for k in range(1 + i % 3)]


def test_concurrent_grpc_calls_with_multiple_inputs_and_outputs(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def call(i: int) -> None:
            n = 1 + i % 4
            a = np.arange(2 * n, dtype=np.float32).reshape(n, 2) + i
            b = np.full(n, i, np.int32)
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "multi_io"
            request.inputs["a"].CopyFrom(tf.make_tensor_proto(a))
            request.inputs["b"].CopyFrom(tf.make_tensor_proto(b))
            outputs = stub.Predict(request, timeout=30).outputs
            np.testing.assert_allclose(tf.make_ndarray(outputs["sum"]), a[:, 0] + a[:, 1] + b)
            assert list(tf.make_ndarray(outputs["b_doubled"])) == [2 * i] * n

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(call, range(120)))


def test_variable_length_inputs_are_padded(server):
    barrier = threading.Barrier(6)

    # TF Serving pads with each tensor's first element, so rows start with 0.0 to keep
    # their sums; without padding, rows of different lengths could not share a batch.
    def call(i: int) -> list:
        row = [0.0] + [1.0] * i
        barrier.wait(10)
        reply = requests.post(
            f"{server.rest}/v1/models/var:predict", json={"instances": [row]}, timeout=30
        )
        assert reply.status_code == 200, reply.text
        return reply.json()["predictions"]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(call, range(6)))
    assert results == [[float(i)] for i in range(6)]


def test_bad_and_oversized_requests_are_400(server):
    reply = requests.post(
        f"{server.rest}/v1/models/hp2:predict", json={"instances": ["x"]}, timeout=30
    )
    assert reply.status_code == 400
    reply = requests.post(
        f"{server.rest}/v1/models/hp2:predict",
        json={"instances": [1.0] * 9},
        timeout=30,
    )
    # A request larger than max_batch_size cannot be batched (TF Serving: INVALID_ARGUMENT).
    assert reply.status_code == 400, reply.text
    assert "Task size 9 is larger than maximum input batch size 8" in reply.json()["error"]


def test_per_model_batching_parameters_come_from_each_version_directory(model_root, tmp_path):
    """--enable_per_model_batching_parameters: a version's batching_params.pbtxt sets its
    model's batching; a model without one is not batched (the global limit of 1 row does not
    apply to it); a file that does not parse fails that model's load."""
    shutil.copytree(model_root / "half_plus_two", tmp_path / "own")
    shutil.copytree(model_root / "half_plus_two", tmp_path / "plain")
    shutil.copytree(model_root / "half_plus_two", tmp_path / "bad")
    (tmp_path / "own" / "123" / "batching_params.pbtxt").write_text("max_batch_size { value: 2 }")
    (tmp_path / "bad" / "123" / "batching_params.pbtxt").write_text("max_batch_size: 2")
    (tmp_path / "global.config").write_text("max_batch_size { value: 1 }")
    config = "model_config_list {\n"
    for name in ("own", "plain"):
        config += f"  config {{ name: '{name}' base_path: '{tmp_path / name}' "
        config += "model_platform: 'tensorflow' }\n"
    (tmp_path / "models.config").write_text(config + "}\n")
    args = [
        f"--model_config_file={tmp_path / 'models.config'}",
        "--enable_batching",
        f"--batching_parameters_file={tmp_path / 'global.config'}",
        "--enable_per_model_batching_parameters",
    ]

    def predict(rest: str, model: str, rows: int) -> requests.Response:
        body = {"instances": [float(i) for i in range(rows)]}
        return requests.post(f"{rest}/v1/models/{model}:predict", json=body, timeout=30)

    with model_server(args, tmp_path / "server.log", ready_model="plain") as srv:
        assert predict(srv.rest, "own", 2).json() == {"predictions": [2.0, 2.5]}
        reply = predict(srv.rest, "own", 3)
        assert reply.status_code == 400
        assert reply.json() == {"error": "Task size 3 is larger than maximum input batch size 2"}
        assert predict(srv.rest, "plain", 3).json() == {"predictions": [2.0, 2.5, 3.0]}
    result = subprocess.run(
        [
            str(VENV_BIN / "tfs-model-server"),
            f"--model_base_path={tmp_path / 'bad'}",
            "--port=0",
            f"--grpc_socket_path={tmp_path / 'grpc.sock'}",
            "--enable_batching",
            "--enable_per_model_batching_parameters",
            "--max_num_load_retries=0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 255
    assert "batching_params.pbtxt" in result.stderr + result.stdout
