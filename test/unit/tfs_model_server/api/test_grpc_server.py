"""api.grpc_server: both services served on a TCP port and on a UNIX socket."""

from __future__ import annotations

import socket

import grpc
import pytest
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from tfs_model_server.api.grpc_server import start_grpc_server
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.errors import ServingError


def test_the_unix_socket_serves_too(grpc_server) -> None:
    with grpc.insecure_channel(grpc_server.socket_target) as channel:
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "half_plus_two"
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        assert stub.GetModelStatus(request, timeout=10).model_version_status[0].version == 123


def test_a_port_in_use_is_an_error(plane: DataPlane) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServingError, match=str(port)) as info:
            start_grpc_server(
                plane,
                print,
                port=port,
                socket_path="",
                max_threads=1,
                channel_arguments=[("grpc.so_reuseport", 0)],
                host="127.0.0.1",
            )
    assert info.value.status_text().startswith(  # server.cc's status
        f"INVALID_ARGUMENT: Failed to BuildAndStart gRPC server: cannot listen on 127.0.0.1:{port}"
    )
