"""tfs-model-server's model discovery and config reloads against TF Serving's own tests, live.

Ported from tensorflow_serving/model_servers/server_core_test.cc (ServerCoreTest: reloads
that add, unload and re-add models, version labels and their rules, config errors) and
tensorflow_serving/sources/storage_path/file_system_storage_path_source_test.cc
(PollFilesystemOnlyOnce), as far as they can be seen from outside a running server: over
gRPC's HandleReloadConfigRequest, GetModelStatus and Predict, and the start-up output. Test
names keep the TEST names they port. The model is TF Serving's
saved_model_half_plus_two_2_versions (test/support/tfs_testdata), copied into version
directories under tmp_path.

The cases of both files that need no live server (version policies, directory names, config
checks, ...) are in test/unit/tfs_model_server/core/test_manager_conformance.py, whose
docstring lists what was not ported and why. Not ported from here either:
IllegalReconfigurationToCustomConfig's FAILED_PRECONDITION "Cannot transition to requested
config": over gRPC, model_service_impl.cc refuses a custom config before ServerCore sees it
(INVALID_ARGUMENT with its own text, checked below), and through a polled config file it is
only logged. ReloadConfigWaitsTillModelsAvailable
starts from an empty model_config_list, not from a config with nothing set (which we refuse at
start-up and TF Serving takes as "no models").
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from conftest import OUR_SERVER, model_server
from tfs_testdata_dir import TESTDATA

TWO_VERSIONS = TESTDATA / "saved_model_half_plus_two_2_versions"
OK, INVALID_ARGUMENT, FAILED_PRECONDITION = 0, 3, 9
BOGUS_VERSION = 777  # test_util::kTestModelBogusVersion


def copy_versions(base: Path, *versions: int) -> Path:
    """saved_model_half_plus_two_2_versions' version 123 as each of `versions` under base."""
    for version in versions:
        shutil.copytree(TWO_VERSIONS / "00000123", base / str(version))
    return base


def model_config(base: Path, extra: str = "", platform: str = "model_platform: 'tensorflow'"):
    """A model_config_list with model "m" serving every version under base."""
    text = (
        f"model_config_list {{ config {{ name: 'm' base_path: '{base}' {platform}"
        f" model_version_policy {{ all {{}} }} {extra} }} }}"
    )
    return text_format.Parse(text, model_server_config_pb2.ModelServerConfig())


def labels(**versions: int) -> str:
    return " ".join(f"version_labels {{ key: '{k}' value: {v} }}" for k, v in versions.items())


class Client:
    """gRPC ModelService and PredictionService stubs of one server."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.models = model_service_pb2_grpc.ModelServiceStub(channel)
        self.predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def reload(self, config) -> tuple[int, str]:
        """The reload's (code, message): TF Serving fails the call with them."""
        request = model_management_pb2.ReloadConfigRequest(config=config)
        try:
            status = self.models.HandleReloadConfigRequest(request, timeout=120).status
        except grpc.RpcError as exc:
            return exc.code().value[0], exc.details()
        assert (status.error_code, status.error_message) == (OK, "")
        return OK, ""

    def states(self, name: str = "m") -> dict[int, str]:
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = name
        try:
            reply = self.models.GetModelStatus(request, timeout=10)
        except grpc.RpcError:
            return {}
        names = get_model_status_pb2.ModelVersionStatus.State.Name
        return {s.version: names(s.state) for s in reply.model_version_status}

    def served_version(self, version: int | None = None, label: str | None = None) -> int:
        """The version a Predict of model "m" was answered by."""
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "m"
        if version is not None:
            request.model_spec.version.value = version
        if label is not None:
            request.model_spec.version_label = label
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0], np.float32)))
        return self.predictions.Predict(request, timeout=10).model_spec.version.value

    def predict_error(self, **spec) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as info:
            self.served_version(**spec)
        return info.value.code(), info.value.details()


def wait_for_states(client: Client, wanted: dict[int, str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (found := client.states()) != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


@contextlib.contextmanager
def serving(args: list[str], tmp: Path, ready_model: str | None = "m") -> Iterator[Client]:
    """A server started with args, and a client of it once its gRPC port answers."""
    with (
        model_server(args, tmp / "server.log", ready_model) as server,
        grpc.insecure_channel(server.grpc_target) as channel,
    ):
        grpc.channel_ready_future(channel).result(timeout=60)
        yield Client(channel)


def config_file(tmp: Path, text: str) -> str:
    path = tmp / "models.config"
    path.write_text(text)
    return f"--model_config_file={path}"


# ----- reloads that add, unload and re-add a model -------------------------------------------


def test_ReloadConfigWaitsTillModelsAvailable_ReloadConfigUnloadsModels_and_ReloadConfigHandlesLoadingAPreviouslyUnloadedModel(  # noqa: E501
    tmp_path: Path,
) -> None:
    """A server started without models; a reload returns once the new model is AVAILABLE; a
    reload to an empty list unloads it (END); reloading it again loads it again."""
    base = copy_versions(tmp_path / "m", 123, 124)
    args = [config_file(tmp_path, "model_config_list {}\n")]
    with serving(args, tmp_path, ready_model=None) as client:
        assert client.reload(model_config(base)) == (OK, "")
        assert client.states() == {124: "AVAILABLE", 123: "AVAILABLE"}  # no waiting
        empty = model_server_config_pb2.ModelServerConfig()
        empty.model_config_list.SetInParent()
        assert client.reload(empty) == (OK, "")
        assert wait_for_states(client, {124: "END", 123: "END"}) == {124: "END", 123: "END"}
        assert client.reload(model_config(base)) == (OK, "")
        assert client.states() == {124: "AVAILABLE", 123: "AVAILABLE"}
        assert client.served_version() == 124


# ----- one server: versions, labels, config errors --------------------------------------------


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory) -> Iterator[tuple[Client, Path]]:
    """A server of model "m" (versions 123 and 124, all served) and its base path."""
    tmp = tmp_path_factory.mktemp("two_versions")
    base = copy_versions(tmp / "m", 123, 124)
    config = text_format.MessageToString(model_config(base))
    with serving([config_file(tmp, config)], tmp) as client:
        yield client, base


def test_ModelSpecMultipleVersionsAvailable(two_versions) -> None:
    client, base = two_versions
    assert (client.served_version(), client.served_version(version=123)) == (124, 123)
    assert client.reload(model_config(base, labels(A=123, B=124))) == (OK, "")
    assert client.served_version(label="A") == 123
    assert client.served_version(label="B") == 124
    assert client.predict_error(label="nonexistent label") == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Unrecognized servable version label: nonexistent label",
    )


def test_AssignLabelToUnavailableVersion(two_versions) -> None:
    client, base = two_versions
    assert client.reload(model_config(base, labels(**{"nice try": BOGUS_VERSION}))) == (
        FAILED_PRECONDITION,
        f"Request to assign label to version {BOGUS_VERSION} of model m, which is not currently "
        "available for inference",
    )


@pytest.mark.parametrize(
    ("platform", "message"),
    [
        pytest.param(
            "model_platform: 'platform_1'",
            "Illegal to change a model's platform. For model m platform was tensorflow and new "
            "platform requested is platform_1",
            id="IllegalToChangeModelPlatform",
        ),
        pytest.param(
            "model_platform: 'tensorflow' model_type: TENSORFLOW",
            "Illegal setting both ModelServerConfig::model_type (deprecated) and "
            "ModelServerConfig::model_platform, model name is m",
            id="IllegalConfigModelTypeAndPlatformSet",
        ),
    ],
)
def test_illegal_reloads_are_refused_and_change_nothing(two_versions, platform, message) -> None:
    client, base = two_versions
    assert client.reload(model_config(base, platform=platform)) == (INVALID_ARGUMENT, message)
    assert client.states() == {124: "AVAILABLE", 123: "AVAILABLE"}


def test_DeprecatedModelTypeConfig(two_versions) -> None:
    """model_type TENSORFLOW is the "tensorflow" platform: no change of platform."""
    client, base = two_versions
    assert client.reload(model_config(base, platform="model_type: TENSORFLOW")) == (OK, "")
    assert client.states() == {124: "AVAILABLE", 123: "AVAILABLE"}
    assert client.served_version() == 124


def test_a_reload_answers_how_much_the_metrics_it_names_grew(tmp_path: Path) -> None:
    """ReloadConfigRequest.metric_names (model_service_impl.cc's GetMetrics and
    RecordMetricsIncrease): loading one version is one more load attempt; a metric that did not
    change, or that does not exist, grew by 0."""
    base = copy_versions(tmp_path / "m", 123)
    args = [config_file(tmp_path, "model_config_list {}\n")]
    names = [
        "/tensorflow/cc/saved_model/load_attempt_count",
        "/tensorflow/serving/request_count",
        "/no/such/metric",
    ]
    request = model_management_pb2.ReloadConfigRequest(
        config=model_config(base), metric_names=names
    )
    with serving(args, tmp_path, ready_model=None) as client:
        response = client.models.HandleReloadConfigRequest(request, timeout=120)
    assert response.status.error_code == OK
    assert [(m.name, m.int64_value_increase) for m in response.metric] == [
        (names[0], 1),
        (names[1], 0),
        (names[2], 0),
    ]


def test_IllegalReconfigurationToCustomConfig(two_versions) -> None:
    client, _ = two_versions
    config = model_server_config_pb2.ModelServerConfig()
    config.custom_model_config.type_url = "type.googleapis.com/some.Config"
    assert client.reload(config) == (
        INVALID_ARGUMENT,
        "ServerModelConfig type not supported by HandleReloadConfigRequest. Only ModelConfigList "
        "is currently supported",
    )
    assert client.states() == {124: "AVAILABLE", 123: "AVAILABLE"}


# ----- --allow_version_labels_for_unavailable_models ------------------------------------------


def test_AssignLabelToUnavailableVersionAllowed_and_AssignExistingLabelToUnavailableVersionDisallowed(  # noqa: E501
    tmp_path: Path,
) -> None:
    base = copy_versions(tmp_path / "m", 123, 124)
    args = [
        config_file(tmp_path, text_format.MessageToString(model_config(base))),
        "--allow_version_labels_for_unavailable_models=true",
    ]
    with serving(args, tmp_path) as client:
        assert client.reload(model_config(base, labels(A=123, B=124))) == (OK, "")
        unavailable = model_config(base, labels(A=123, B=124, **{"nice try": BOGUS_VERSION}))
        assert client.reload(unavailable) == (OK, "")
        assert client.reload(unavailable) == (OK, "")  # the same label on the same version
        assert client.predict_error(label="nice try") == (
            grpc.StatusCode.NOT_FOUND,
            f"Servable not found for request: Specific(m, {BOGUS_VERSION})",
        )
        assert client.reload(model_config(base, labels(A=BOGUS_VERSION, B=124))) == (
            FAILED_PRECONDITION,
            f"Request to assign label to version {BOGUS_VERSION} of model m, which is not "
            "currently available for inference",
        )
        assert client.served_version(label="A") == 123


# ----- start-up -----------------------------------------------------------------------------


def test_PollFilesystemOnlyOnce(tmp_path: Path) -> None:
    """--file_system_poll_wait_seconds=0: the base path is read once, at start-up."""
    base = copy_versions(tmp_path / "m", 3)
    args = [f"--model_base_path={base}", "--model_name=m", "--file_system_poll_wait_seconds=0"]
    with serving(args, tmp_path) as client:
        copy_versions(base, 4)
        deadline = time.monotonic() + 3  # three times the default poll period
        while time.monotonic() < deadline:
            assert client.states() == {3: "AVAILABLE"}
            time.sleep(0.2)


def test_IllegalReconfigurationFromCustomConfig(tmp_path: Path) -> None:
    """A custom_model_config needs a loader tensorflow_model_server does not have."""
    config = config_file(tmp_path, 'custom_model_config { type_url: "type.googleapis.com/x" }\n')
    result = subprocess.run(
        [OUR_SERVER, config, "--port=0", f"--grpc_socket_path={tmp_path}/s"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 255
    assert "Failed to start server. Error: " in result.stdout
    assert "Missing custom_model_config_loader in ServerCore Options" in result.stdout
