"""The model server's gRPC server: PredictionService and ModelService on a port and/or a socket."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures
from typing import Any

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc

from tfs_model_server.api import grpc_health, grpc_profiler, prediction_service
from tfs_model_server.api.model_service import ModelService, ReloadFn
from tfs_model_server.api.prediction_service import PredictionService
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.errors import invalid_argument


def start_grpc_server(
    plane: DataPlane,
    reload_config: ReloadFn,
    *,
    port: int,
    socket_path: str,
    max_threads: int,
    channel_arguments: Sequence[tuple[str, Any]],
    host: str = "0.0.0.0",
    credentials: grpc.ServerCredentials | None = None,
    health: Any = None,
    profiler: bool = False,
) -> grpc.Server:
    """Serve both services on 0.0.0.0:port and/or a UNIX socket, over TLS when `credentials`
    are given (grpc_tls), with the `health` servicer when given (grpc_health) and TensorFlow's
    profiler service when `profiler` (grpc_profiler); max message size INT32_MAX."""
    options = [
        ("grpc.max_send_message_length", 2**31 - 1),
        ("grpc.max_receive_message_length", 2**31 - 1),
        *channel_arguments,
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="grpc"),
        options=options,
        maximum_concurrent_rpcs=None,
    )
    prediction_service.add_to_server(PredictionService(plane), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(
        ModelService(plane, reload_config), server
    )

    if health is not None:
        grpc_health.add_to_server(health, server)
    if profiler:
        grpc_profiler.add_to_server(server)

    def listen(address: str) -> None:
        """Bind `address`; TF's INVALID_ARGUMENT (not grpc's RuntimeError and its traceback)
        when it fails."""
        try:
            if credentials is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, credentials)
        except RuntimeError:
            bound = 0
        if bound == 0:
            why = " (with TLS: are server_key and server_cert a matching PEM key and certificate?)"
            raise invalid_argument(
                f"Failed to BuildAndStart gRPC server: cannot listen on {address}"
                + (why if credentials is not None else "")
            )

    if port:
        listen(f"{host}:{port}")
    if socket_path:
        listen(f"unix:{socket_path}")
    server.start()
    return server
