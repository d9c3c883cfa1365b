"""GrpcClient against real model servers: Predict, ReloadConfig, and their failures as the
statuses TF Serving's REST API answers."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from sagemaker_serving.config.model_discovery import Model
from sagemaker_serving.config.tfs_config import model_server_config
from sagemaker_serving.tfs_client import wire
from sagemaker_serving.tfs_client.errors import (
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)
from sagemaker_serving.tfs_client.grpc import GrpcClient
from sagemaker_serving.tfs_client.rest import RestClient


def deadline(seconds: float = 10.0) -> float:
    return time.monotonic() + seconds


@pytest.fixture(scope="module")
def grpc_client(tfs_server) -> GrpcClient:
    return GrpcClient([tfs_server.grpc_port])


def predict(client: GrpcClient, model: str, x: np.ndarray, version: int | None = None):
    request = wire.predict_request(model, version, None, {"x": x})
    return wire.predict_outputs(client.predict(0, request, deadline()))


def test_predict_answers_the_models_outputs(grpc_client):
    outputs = predict(grpc_client, "half_plus_two", np.array([1.0, 2.0, 5.0], np.float32))
    assert outputs["y"].tolist() == [2.5, 3.0, 4.5]
    outputs = predict(grpc_client, "half_plus_three", np.array([1.0], np.float32), version=123)
    assert outputs["y"].tolist() == [3.5]


def test_one_channel_per_instance(grpc_client):
    assert grpc_client.channel(0) is grpc_client.channel(0)


@pytest.mark.parametrize(
    ("model", "x", "status", "words"),
    [
        ("no_such_model", np.array([1.0], np.float32), 404, "no_such_model"),
        ("half_plus_two", np.array([b"x"], object), 400, "to be float but string is provided"),
    ],
)
def test_errors_have_the_rest_apis_status_and_the_model_servers_text(
    grpc_client, model, x, status, words
):
    with pytest.raises(ModelServerError) as info:
        predict(grpc_client, model, x)
    assert info.value.status == status and words in info.value.message


def test_a_port_nobody_listens_on_is_503():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        client = GrpcClient([sock.getsockname()[1]])
        with pytest.raises(ModelServerUnavailable) as info:
            predict(client, "half_plus_two", np.array([1.0], np.float32))
    assert info.value.status == 503
    # the reason (refused, at which address) is logged, not told to the client
    assert info.value.message == "The model server is unavailable"


def test_a_deadline_already_past_is_504(grpc_client):
    request = wire.predict_request("half_plus_two", None, None, {"x": np.ones(1, np.float32)})
    with pytest.raises(ModelServerTimeout) as info:
        grpc_client.predict(0, request, time.monotonic() - 1)
    assert info.value.status == 504
    with pytest.raises(ModelServerTimeout) as info:
        grpc_client.reload_config(0, b"", time.monotonic() - 1)
    assert info.value.message == "The deadline passed before the model server was asked"


def test_reload_config_loads_and_unloads_and_says_what_failed(
    empty_tfs_server, small_models, tmp_path
):
    client = GrpcClient([empty_tfs_server.grpc_port])
    rest = RestClient([empty_tfs_server.rest_port])
    model = Model("loaded", small_models / "half_plus_two", (123,))
    try:
        config = model_server_config([model]).SerializeToString()
        assert client.reload_config(0, config, deadline(60)) is None
        assert rest.version_states(0, "loaded", deadline()) == {123: "AVAILABLE"}
        (tmp_path / "broken" / "1").mkdir(parents=True)
        (tmp_path / "broken" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
        broken = Model("broken", tmp_path / "broken", (1,))
        refused = client.reload_config(
            0, model_server_config([broken]).SerializeToString(), deadline(60)
        )
        assert refused is not None and "broken" in refused.message, refused
        # the failed version's own code, carried by its status (the refusal is UNKNOWN)
        codes = rest.version_error_codes(0, "broken", deadline())
        assert codes and "OK" not in codes, codes
    finally:
        client.reload_config(0, model_server_config([]).SerializeToString(), deadline(60))
    states = rest.version_states(0, "loaded", deadline())
    assert all(state == "END" for state in states.values())
