"""TF Serving's binary-level integration test, ported to run against our tfs-model-server.

Ports tensorflow_serving/model_servers/tensorflow_model_server_test.py (with its helpers in
test_util/tensorflow_model_server_test_base.py) from the TF Serving at commit 9d981c5c. Each
test keeps TF Serving's name in snake case (testClassifyREST -> test_classify_rest). Servers run
with RunServer's flags: --rest_api_timeout_in_ms=5000, --grpc_socket_path and
--grpc_channel_arguments=<the test's arguments>,grpc.so_reuseaddr=1, then either
--model_name/--model_base_path or --model_config_file, and the test's own flags. As RunServer
reuses one server for the same arguments, the tests that serve saved_model_half_plus_two_cpu
(or _tf2_cpu) as "default" share one module-scoped server; the others start their own. The
models and config files are TF Serving's testdata in test/support/tfs_testdata (its README.md).

Differences of the test environment, not of behaviour:
- the servers listen on 127.0.0.1 on free ports, and each has its own --grpc_socket_path in a
  temporary directory instead of the shared /tmp/tf-serving.sock (a shared machine);
- a server is used once its models are AVAILABLE over REST (instead of WaitForServerReady's
  polling with a gRPC Predict for a missing model), so CallREST needs no retries;
- every RPC has TF Serving's test's 20 s timeout (VerifyPredictRequest's own is 5 s);
- Keras 3 (TensorFlow >= 2.16) names the default signature's tensors `inputs` and `output_0`,
  where the Keras 2 of TF Serving's test named them after the layers (`x`, `y`); the Keras tests
  send and read the names of the export (the models and the expected values are the same);
- tf.saved_model.save of a Keras 3 model built under MirroredStrategy writes a graph whose
  restore op fills other variables than those its serving function reads, so no Session-based
  loader can serve it (TensorFlow's own loader_impl.load fails on it as our server does, with
  "Could not find variable sequential/dense/kernel", and TF Serving's C++ LoadSavedModel runs
  the same restore op): test_distrat_sequential_keras_saved_model_save exports the model with
  Keras 3's model.export, its SavedModel export for TF Serving.

Not ported (28 of the 30 tests are):
- test_tf_text: needs tensorflow_text, and its tf_text_regression model is missing from the
  TF Serving snapshot;
- test_profiler_service_with_valid_trace_request: covered by
  test_model_server_profiler.py::test_tensorflows_client_traces_the_server (TensorFlow's
  profiler client traces the server's gRPC port while REST predictions run).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
from tensorflow_serving.apis.classification_pb2 import ClassificationRequest
from tensorflow_serving.apis.get_model_metadata_pb2 import GetModelMetadataRequest
from tensorflow_serving.apis.get_model_status_pb2 import GetModelStatusRequest
from tensorflow_serving.apis.inference_pb2 import MultiInferenceRequest
from tensorflow_serving.apis.predict_pb2 import PredictRequest
from tensorflow_serving.apis.regression_pb2 import RegressionRequest

from conftest import OUR_SERVER, model_server
from model_server_process import ModelServerProcess
from tfs_testdata_dir import TESTDATA

HALF_PLUS_TWO = TESTDATA / "saved_model_half_plus_two_cpu"  # _GetSavedModelBundlePath
HALF_PLUS_TWO_TF2 = TESTDATA / "saved_model_half_plus_two_tf2_cpu"
HALF_PLUS_THREE = TESTDATA / "saved_model_half_plus_three"
TFLITE = TESTDATA / "saved_model_half_plus_two_tflite"  # _GetTfLiteModelPath
TFLITE_WITH_SIGDEF = TESTDATA / "saved_model_half_plus_two_tflite_with_sigdef"
RPC_TIMEOUT = 20.0
HTTP_REST_TIMEOUT_MS = 5000
DEFAULT_SIGNATURE = "serving_default"
READY_TIMEOUT = 180.0

# ----- tensorflow_model_server_test_base.py ------------------------------------------------


def run_server_args(
    model_name: str | None,
    model_path: Path | None,
    socket_path: Path,
    model_config_file: Path | None = None,
    monitoring_config_file: Path | None = None,
    grpc_channel_arguments: str = "",
    model_config_file_poll_period: int | None = None,
    model_type: str = "tf",
) -> list[str]:
    """RunServer's flags after --port and --rest_api_port."""
    args = [
        f"--rest_api_timeout_in_ms={HTTP_REST_TIMEOUT_MS}",
        f"--grpc_socket_path={socket_path}",
    ]
    if model_config_file:
        args.append(f"--model_config_file={model_config_file}")
    elif model_path:
        args += [f"--model_name={model_name}", f"--model_base_path={model_path}"]
    else:
        raise ValueError("Both model_config_file and model_path cannot be empty!")
    if model_type == "tflite":
        args.append("--prefer_tflite_model=true")
    if monitoring_config_file:
        args.append(f"--monitoring_config_file={monitoring_config_file}")
    if model_config_file_poll_period is not None:
        args.append(f"--model_config_file_poll_wait_seconds={model_config_file_poll_period}")
    channel_args = ",".join(arg for arg in (grpc_channel_arguments, "grpc.so_reuseaddr=1") if arg)
    return [*args, f"--grpc_channel_arguments={channel_args}"]


@contextlib.contextmanager
def run_server(
    tmp: Path, ready: tuple[str, ...] = ("default",), **flags: Any
) -> Iterator[ModelServerProcess]:
    """A server with RunServer's flags (run_server_args) whose `ready` models are AVAILABLE,
    always stopped; `socket_path` is its --grpc_socket_path."""
    socket_path = tmp / "tf-serving.sock"
    with model_server(run_server_args(socket_path=socket_path, **flags), tmp / "server.log") as srv:
        assert srv.wait_ready(list(ready), READY_TIMEOUT), srv.log()[-5000:]
        srv.socket_path = socket_path
        yield srv


def model_version(model_path: Path) -> int:
    """_GetModelVersion: the one version directory under `model_path`."""
    (version,) = (int(p.name) for p in model_path.iterdir())
    return version


def verify_model_spec(actual: Any, name: str, signature_name: str, version: int) -> None:
    """_VerifyModelSpec."""
    assert actual.name == name
    assert actual.signature_name == signature_name
    assert actual.version.value == version


def call(target: str, method: str, request: Any) -> Any:
    """PredictionService's `method` on `target`, with RPC_TIMEOUT."""
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        return getattr(stub, method)(request, RPC_TIMEOUT)


def verify_predict_request(
    target: str,
    expected_output: float,
    expected_version: int,
    model_name: str = "default",
    specify_output: bool = True,
    batch_input: bool = False,
    signature_name: str = DEFAULT_SIGNATURE,
    input_name: str = "x",
    output_name: str = "y",
) -> None:
    """VerifyPredictRequest: x = [2.0] (shape [1], or [1, 1] with batch_input) gives one float
    y; `input_name` and `output_name` are "x" and "y" there (see the Keras tests)."""
    request = PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    request.inputs[input_name].dtype = types_pb2.DT_FLOAT
    request.inputs[input_name].float_val.append(2.0)
    request.inputs[input_name].tensor_shape.dim.add().size = 1
    if batch_input:
        request.inputs[input_name].tensor_shape.dim.add().size = 1
    if specify_output:
        request.output_filter.append(output_name)
    result = call(target, "Predict", request)
    assert output_name in result.outputs
    assert result.outputs[output_name].dtype == types_pb2.DT_FLOAT
    assert len(result.outputs[output_name].float_val) == 1
    assert result.outputs[output_name].float_val[0] == expected_output
    verify_model_spec(result.model_spec, model_name, signature_name, expected_version)


def verify_prediction(
    target: str, expected_output: float, model_path: Path, model_name: str = "default"
) -> None:
    """verify_predict_request without an output filter, expecting `model_path`'s version."""
    verify_predict_request(
        target,
        model_name=model_name,
        expected_output=expected_output,
        specify_output=False,
        expected_version=model_version(model_path),
    )


def check_predict(target: str, model_path: Path) -> None:
    """_TestPredict (without batching): with and without an output filter."""
    version = model_version(model_path)
    verify_predict_request(target, expected_output=3.0, expected_version=version)
    verify_predict_request(
        target, expected_output=3.0, specify_output=False, expected_version=version
    )


def call_rest(url: str, req: Any) -> bytes:
    """CallREST: POST the JSON of `req`, or GET when it is None; the response body."""
    data = json.dumps(req).encode("utf-8") if req is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30) as resp:
        return resp.read()


def sorted_object(obj: Any) -> Any:
    """SortedObject: `obj` with its nested lists and dictionaries sorted."""
    if isinstance(obj, dict):
        return sorted((k, sorted_object(v)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return sorted(sorted_object(x) for x in obj)
    return obj


# ----- servers shared as RunServer shares them --------------------------------------------


@pytest.fixture(scope="module")
def default_server(tmp_path_factory) -> Iterator[ModelServerProcess]:
    """RunServer('default', saved_model_half_plus_two_cpu)."""
    tmp = tmp_path_factory.mktemp("default")
    with run_server(tmp, model_name="default", model_path=HALF_PLUS_TWO) as server:
        yield server


@pytest.fixture(scope="module")
def default_tf2_server(tmp_path_factory) -> Iterator[ModelServerProcess]:
    """RunServer('default', saved_model_half_plus_two_tf2_cpu)."""
    tmp = tmp_path_factory.mktemp("default_tf2")
    with run_server(tmp, model_name="default", model_path=HALF_PLUS_TWO_TF2) as server:
        yield server


@pytest.fixture(params=["tf1", "tf2"])
def model(request) -> tuple[ModelServerProcess, Path]:
    """(server, model path): the TF1 test and its Tf2 twin (testClassify, testClassifyTf2)."""
    if request.param == "tf1":
        return request.getfixturevalue("default_server"), HALF_PLUS_TWO
    return request.getfixturevalue("default_tf2_server"), HALF_PLUS_TWO_TF2


def x_example(request_input: Any) -> None:
    """The one Example {x: 2.0} of every Classify, Regress and MultiInference request."""
    example = request_input.example_list.examples.add()
    example.features.feature["x"].float_list.value.extend([2.0])


def x_request(request: Any, signature: str) -> Any:
    """A Classify or Regress `request` of model "default" and `signature`, for x_example."""
    request.model_spec.name = "default"
    request.model_spec.signature_name = signature
    x_example(request.input)
    return request


# ----- gRPC --------------------------------------------------------------------------------


def test_get_model_status(default_server) -> None:
    request = GetModelStatusRequest()
    request.model_spec.name = "default"
    with grpc.insecure_channel(default_server.grpc_target) as channel:
        result = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
            request, RPC_TIMEOUT
        )
    assert len(result.model_version_status) == 1
    assert result.model_version_status[0].version == 123
    assert result.model_version_status[0].status.error_code == 0


def test_get_model_metadata(default_server) -> None:
    request = GetModelMetadataRequest()
    request.model_spec.name = "default"
    request.metadata_field.append("signature_def")
    result = call(default_server.grpc_target, "GetModelMetadata", request)
    assert result.model_spec.name == "default"
    assert result.model_spec.version.value == model_version(HALF_PLUS_TWO)
    assert len(result.metadata) == 1
    assert "signature_def" in result.metadata


def test_classify(model) -> None:
    """testClassify (tf1) and testClassifyTf2 (tf2)."""
    server, model_path = model
    request = x_request(ClassificationRequest(), "classify_x_to_y")
    result = call(server.grpc_target, "Classify", request)
    assert len(result.result.classifications) == 1
    assert len(result.result.classifications[0].classes) == 1
    assert result.result.classifications[0].classes[0].score == 3.0
    verify_model_spec(result.model_spec, "default", "classify_x_to_y", model_version(model_path))


def test_regress(model) -> None:
    """testRegress (tf1) and testRegressTf2 (tf2)."""
    server, model_path = model
    result = call(server.grpc_target, "Regress", x_request(RegressionRequest(), "regress_x_to_y"))
    assert len(result.result.regressions) == 1
    assert result.result.regressions[0].value == 3.0
    verify_model_spec(result.model_spec, "default", "regress_x_to_y", model_version(model_path))


def test_multi_inference(model) -> None:
    """testMultiInference (tf1) and testMultiInferenceTf2 (tf2)."""
    server, model_path = model
    request = MultiInferenceRequest()
    for signature, method in (
        ("regress_x_to_y", "tensorflow/serving/regress"),
        ("classify_x_to_y", "tensorflow/serving/classify"),
    ):
        task = request.tasks.add(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = "default", signature
    x_example(request.input)
    result = call(server.grpc_target, "MultiInference", request)
    assert len(result.results) == 2
    assert result.results[0].regression_result.regressions[0].value == 3.0
    assert result.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for i in range(2):
        verify_model_spec(
            result.results[i].model_spec,
            request.tasks[i].model_spec.name,
            request.tasks[i].model_spec.signature_name,
            model_version(model_path),
        )


def test_predict_saved_model(default_server) -> None:
    check_predict(default_server.grpc_target, HALF_PLUS_TWO)


@pytest.mark.parametrize("model_path", [TFLITE, TFLITE_WITH_SIGDEF], ids=["plain", "sigdef"])
def test_predict_on_tflite(tmp_path, model_path) -> None:
    """testPredictOnTfLite, testPredictWithSignatureDefOnTfLite: x [1] into the [1, 1] input
    of a TF1 conversion, through the generated serving_default (plain) or the one in the
    model's signature_defs_metadata (sigdef: input x is tensor "tflite_input")."""
    with run_server(
        tmp_path, model_name="default", model_path=model_path, model_type="tflite"
    ) as server:
        verify_predict_request(
            server.grpc_target,
            expected_output=3.0,
            specify_output=False,
            expected_version=model_version(TFLITE),
        )


def test_predict_uds(default_server) -> None:
    """Predict over the Unix domain socket of --grpc_socket_path."""
    verify_prediction(f"unix:{default_server.socket_path}", 3.0, HALF_PLUS_THREE)


# ----- model config files ------------------------------------------------------------------


def test_good_model_config(tmp_path) -> None:
    """good_model_config.txt, its ${TEST_*_DIR} replaced (__BuildModelConfigFile)."""
    config = (TESTDATA / "good_model_config.txt").read_text()
    config = config.replace("${TEST_HALF_PLUS_TWO_DIR}", str(HALF_PLUS_TWO))
    config = config.replace("${TEST_HALF_PLUS_THREE_DIR}", str(HALF_PLUS_THREE))
    config_file = tmp_path / "good_model_config.conf"
    config_file.write_text(config)
    ready = ("half_plus_two", "half_plus_three")
    with run_server(
        tmp_path, ready, model_name=None, model_path=None, model_config_file=config_file
    ) as server:
        for name, path, output in (
            ("half_plus_two", HALF_PLUS_TWO, 3.0),
            ("half_plus_three", HALF_PLUS_THREE, 4.0),
        ):
            for specify_output in (True, False):
                verify_predict_request(
                    server.grpc_target,
                    model_name=name,
                    expected_output=output,
                    specify_output=specify_output,
                    expected_version=model_version(path),
                )


def test_bad_model_config(tmp_path) -> None:
    """The server reports bad_model_config.txt on stderr (and exits)."""
    args = run_server_args(
        None,
        None,
        tmp_path / "tf-serving.sock",
        model_config_file=TESTDATA / "bad_model_config.txt",
    )
    command = ModelServerProcess(args, tmp_path / "unused.log", executable=OUR_SERVER).command()
    proc = subprocess.run(command, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    error_message = b"Error parsing text-format tensorflow.serving.ModelServerConfig"
    assert proc.stderr.find(error_message) > -1, proc.stderr


BASE_CONFIG_PROTO = """
    model_config_list: {{
      config: {{
        name: "{name}",
        base_path: "{model_path}",
        model_platform: "tensorflow"
      }}
    }}
    """


def write_config(path: Path, name: str, model_path: Path) -> None:
    path.write_text(BASE_CONFIG_PROTO.format(name=name, model_path=model_path))


@contextlib.contextmanager
def reconfigured_server(tmp_path: Path, poll_period: int) -> Iterator[ModelServerProcess]:
    """A server on a config file of half_plus_two, polled every `poll_period` seconds; once
    half_plus_two answers, the file names half_plus_three instead."""
    config_path = tmp_path / "model_config.txt"
    write_config(config_path, "half_plus_two", HALF_PLUS_TWO)
    with run_server(
        tmp_path,
        ("half_plus_two",),
        model_name=None,
        model_path=None,
        model_config_file=config_path,
        model_config_file_poll_period=poll_period,
    ) as server:
        verify_prediction(server.grpc_target, 3.0, HALF_PLUS_TWO, "half_plus_two")
        write_config(config_path, "half_plus_three", HALF_PLUS_THREE)
        yield server


def test_model_config_reload(tmp_path) -> None:
    """The server polls its config file (--model_config_file_poll_wait_seconds=1)."""
    with reconfigured_server(tmp_path, 1) as server:
        # TF Serving sleeps 10 s and then predicts; here the prediction is retried for at
        # most those 10 s, which asserts the same and usually ends sooner
        deadline = time.monotonic() + 10
        while True:
            try:
                verify_prediction(server.grpc_target, 4.0, HALF_PLUS_THREE, "half_plus_three")
                break
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def test_model_config_reload_with_zero_poll_period(tmp_path) -> None:
    """--model_config_file_poll_wait_seconds=0: the config file is read once."""
    poll_period = 0
    with reconfigured_server(tmp_path, poll_period) as server:
        time.sleep(poll_period + 1)
        verify_prediction(server.grpc_target, 3.0, HALF_PLUS_THREE, "half_plus_two")


def test_good_grpc_channel_args(tmp_path) -> None:
    with run_server(
        tmp_path,
        model_name="default",
        model_path=HALF_PLUS_TWO,
        grpc_channel_arguments="grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb",
    ) as server:
        verify_prediction(server.grpc_target, 3.0, HALF_PLUS_THREE)


# ----- REST --------------------------------------------------------------------------------


def test_classify_rest(default_server) -> None:
    url = f"{default_server.rest}/v1/models/default:classify"
    json_req = {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}
    assert json.loads(call_rest(url, json_req).decode()) == {"results": [[["", 3.0]]]}


def test_regress_rest(default_server) -> None:
    url = f"{default_server.rest}/v1/models/default:regress"
    json_req = {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}
    assert json.loads(call_rest(url, json_req).decode()) == {"results": [3.0]}


def test_predict_rest(default_server) -> None:
    url = f"{default_server.rest}/v1/models/default:predict"
    json_req = {"instances": [2.0, 3.0, 4.0]}
    assert json.loads(call_rest(url, json_req).decode()) == {"predictions": [3.0, 3.5, 4.0]}


def test_predict_columnar_rest(default_server) -> None:
    url = f"{default_server.rest}/v1/models/default:predict"
    json_req = {"inputs": [2.0, 3.0, 4.0]}
    assert json.loads(call_rest(url, json_req).decode()) == {"outputs": [3.0, 3.5, 4.0]}


def test_get_status_rest(default_server) -> None:
    resp_data = call_rest(f"{default_server.rest}/v1/models/default", None)
    assert json.loads(resp_data.decode()) == {
        "model_version_status": [
            {
                "version": "123",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }


def test_get_model_metadata_rest(default_server) -> None:
    """The answer is half_plus_two_model_metadata.json, compared sorted as TF Serving does."""
    resp_data = call_rest(f"{default_server.rest}/v1/models/default/metadata", None)
    expected_metadata = json.loads((TESTDATA / "half_plus_two_model_metadata.json").read_text())
    assert sorted_object(json.loads(resp_data.decode())) == sorted_object(expected_metadata)


def test_prometheus_endpoint(tmp_path) -> None:
    with run_server(
        tmp_path,
        model_name="default",
        model_path=HALF_PLUS_TWO,
        monitoring_config_file=TESTDATA / "monitoring_config.txt",
    ) as server:
        resp_data = call_rest(f"{server.rest}/monitoring/prometheus/metrics", None)
    assert "# TYPE" in resp_data.decode("utf-8")


# ----- models saved by the test --------------------------------------------------------------


def test_tf_saved_model_save(tmp_path) -> None:
    import tensorflow.compat.v1 as tf

    base_path = tmp_path / "tf_saved_model_save"
    export_path = base_path / "00000123"
    root = tf.train.Checkpoint()
    root.v1 = tf.Variable(3.0)
    root.v2 = tf.Variable(2.0)
    root.f = tf.function(lambda x: {"y": root.v1 * root.v2 * x})
    to_save = root.f.get_concrete_function(tf.TensorSpec(None, tf.float32))
    tf.saved_model.experimental.save(root, str(export_path), to_save)
    with run_server(tmp_path, model_name="default", model_path=base_path) as server:
        verify_prediction(server.grpc_target, 12.0, base_path)


def test_tf_saved_model_save_multiple_signatures(tmp_path) -> None:
    import tensorflow.compat.v1 as tf

    base_path = tmp_path / "tf_saved_model_save"
    export_path = base_path / "00000123"
    root = tf.train.Checkpoint()
    root.f = tf.function(lambda x: {"y": 1.0}, input_signature=[tf.TensorSpec(None, tf.float32)])
    root.g = tf.function(lambda x: {"y": 2.0}, input_signature=[tf.TensorSpec(None, tf.float32)])
    tf.saved_model.experimental.save(
        root,
        str(export_path),
        signatures={DEFAULT_SIGNATURE: root.f, "custom_signature_key": root.g},
    )
    with run_server(tmp_path, model_name="default", model_path=base_path) as server:
        expected_version = model_version(base_path)
        verify_predict_request(
            server.grpc_target,
            expected_output=2.0,
            expected_version=expected_version,
            signature_name="custom_signature_key",
        )
        verify_predict_request(
            server.grpc_target, expected_output=1.0, expected_version=expected_version
        )


# Keras 3's names of the exports' input and output (module docstring)
SAVED_INPUT, EXPORTED_INPUT, KERAS_OUTPUT = "inputs", "x", "output_0"


def verify_keras_model(tmp_path: Path, base_path: Path, input_name: str) -> None:
    """The Keras tests' check: x = [[2.0]] gives y = 2.0."""
    with run_server(tmp_path, model_name="default", model_path=base_path) as server:
        verify_predict_request(
            server.grpc_target,
            batch_input=True,
            specify_output=False,
            expected_output=2.0,
            expected_version=model_version(base_path),
            input_name=input_name,
            output_name=KERAS_OUTPUT,
        )


def test_sequential_keras_saved_model_save(tmp_path) -> None:
    """A simple SavedModel created with the Keras Sequential API."""
    import tensorflow.compat.v1 as tf

    model = tf.keras.models.Sequential()
    model.add(tf.keras.layers.Input(dtype="float32", shape=(1,), name="x"))
    model.add(tf.keras.layers.Lambda(lambda x: x, name="y"))
    base_path = tmp_path / "keras_sequential_saved_model_save"
    tf.saved_model.save(model, str(base_path / "00000123"))
    verify_keras_model(tmp_path, base_path, SAVED_INPUT)


# TF Serving's test: SetVirtualCpus(2), then the model. Virtual CPUs can only be set before
# TensorFlow's runtime starts, which other tests in this process may have done already: the
# model is built in a fresh interpreter. model.export instead of tf.saved_model.save: see the
# module docstring.
DISTRAT_EXPORT = """
import sys
import tensorflow.compat.v1 as tf

cpu = tf.config.experimental.list_physical_devices('CPU')[0]
tf.config.experimental.set_virtual_device_configuration(
    cpu, [tf.config.experimental.VirtualDeviceConfiguration() for _ in range(2)])
strategy = tf.distribute.MirroredStrategy(devices=('/cpu:0', '/cpu:1'))
with strategy.scope():
  model = tf.keras.models.Sequential()
  model.add(tf.keras.layers.Input(dtype='float32', shape=(1,), name='x'))
  model.add(tf.keras.layers.Dense(1, kernel_initializer='ones', bias_initializer='zeros'))
  model.add(tf.keras.layers.Lambda(lambda x: x, name='y'))
model.export(sys.argv[1])
"""


def test_distrat_sequential_keras_saved_model_save(tmp_path) -> None:
    """A Keras SavedModel made with tf.distribute (MirroredStrategy on two virtual CPUs)."""
    base_path = tmp_path / "keras_sequential_saved_model_save"
    export = subprocess.run(
        [sys.executable, "-c", DISTRAT_EXPORT, str(base_path / "00000123")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert export.returncode == 0, export.stderr[-5000:]
    verify_keras_model(tmp_path, base_path, EXPORTED_INPUT)
