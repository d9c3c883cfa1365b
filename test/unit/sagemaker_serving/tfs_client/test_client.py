"""ModelServerClient: the instances round robin, REST and gRPC to the same real one."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from sagemaker_serving.tfs_client import wire
from sagemaker_serving.tfs_client.client import ModelServerClient


def test_instances_take_turns():
    client = ModelServerClient([1, 2, 3], [4, 5, 6])
    assert [client.next_target().index for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert (client.rest_ports, client.grpc_ports) == ([1, 2, 3], [4, 5, 6])


def test_rest_and_grpc_reach_the_same_model_server(tfs_server):
    client = ModelServerClient([tfs_server.rest_port], [tfs_server.grpc_port])
    deadline = time.monotonic() + 10
    index = client.next_target().index
    uri = client.rest.uri(index, "/v1/models/half_plus_two:predict")
    reply = asyncio.run(client.rest.arequest("POST", uri, '{"instances": [4.0]}', deadline))
    request = wire.predict_request("half_plus_two", None, None, {"x": np.array([4.0], np.float32)})
    outputs = wire.predict_outputs(client.grpc.predict(index, request, deadline))
    assert reply.json()["predictions"] == outputs["y"].tolist() == [4.0]


def test_metadata_is_cached_until_the_models_change(tfs_server):
    client = ModelServerClient([tfs_server.rest_port], [tfs_server.grpc_port])
    deadline = time.monotonic() + 10
    first = client.metadata("half_plus_two", None, deadline)
    assert first["model_spec"]["name"] == "half_plus_two"
    assert client.metadata("half_plus_two", None, deadline) is first
    client.forget("half_plus_two")
    assert client.metadata("half_plus_two", None, deadline) is not first
    second = client.metadata("half_plus_two", None, deadline)
    client.clear()
    assert client.metadata("half_plus_two", None, deadline) is not second
