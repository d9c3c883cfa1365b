"""The standard gRPC health service (grpc.health.v1), as TF Serving's
--enable_grpc_healthcheck_service turns it on: the server ("") and its two services answer
SERVING from the start, and NOT_SERVING once the server is shutting down."""

from __future__ import annotations

from typing import Any

SERVICES = ("", "ModelService", "PredictionService")  # the names TF Serving sets


def health_service() -> Any:
    """A grpc_health HealthServicer with every service SERVING (imported only when enabled)."""
    from grpc_health.v1 import health, health_pb2

    servicer = health.HealthServicer()
    for name in SERVICES:
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return servicer


def add_to_server(servicer: Any, server: Any) -> None:
    from grpc_health.v1 import health_pb2_grpc

    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
