"""Internal ports: a (gRPC, REST) pair for each model server instance, from
SAGEMAKER_SAFE_PORT_RANGE."""

from __future__ import annotations

from sagemaker_serving.config.settings import Settings, SettingsError

DEFAULT_GRPC_PORT = 9000
DEFAULT_REST_PORT = 8501
MAX_PORT = 65535


def allocate_model_server_ports(settings: Settings) -> list[tuple[int, int]]:
    """(grpc_port, rest_port) per instance: low+2i and low+2i+1 from SAGEMAKER_SAFE_PORT_RANGE,
    else 9000+i and 8501+i; never SAGEMAKER_BIND_TO_PORT."""
    count = settings.instance_count
    if settings.safe_port_range is not None:
        low, high = settings.safe_port_range
        if low + 2 * count - 1 > high:
            raise SettingsError(
                "SAGEMAKER_SAFE_PORT_RANGE",
                f"{low}-{high} holds {(high - low + 1) // 2} gRPC/REST port pairs, but "
                f"SAGEMAKER_TFS_INSTANCE_COUNT={count} model servers need {2 * count} ports",
            )
        ports = [(low + 2 * i, low + 2 * i + 1) for i in range(count)]
    else:
        last_rest = DEFAULT_REST_PORT + count - 1
        if last_rest >= DEFAULT_GRPC_PORT or DEFAULT_GRPC_PORT + count - 1 > MAX_PORT:
            raise SettingsError(
                "SAGEMAKER_TFS_INSTANCE_COUNT",
                f"{count} model servers do not fit the default ports (REST from "
                f"{DEFAULT_REST_PORT}, gRPC from {DEFAULT_GRPC_PORT}: at most "
                f"{DEFAULT_GRPC_PORT - DEFAULT_REST_PORT}); set SAGEMAKER_SAFE_PORT_RANGE",
            )
        ports = [(DEFAULT_GRPC_PORT + i, DEFAULT_REST_PORT + i) for i in range(count)]
    _check_bind_port(settings.bind_to_port, ports)
    return ports


def _check_bind_port(bind_port: int, ports: list[tuple[int, int]]) -> None:
    for i, (grpc_port, rest_port) in enumerate(ports):
        for kind, port in (("gRPC", grpc_port), ("REST", rest_port)):
            if port == bind_port:
                raise SettingsError(
                    "SAGEMAKER_BIND_TO_PORT",
                    f"port {bind_port} is also the {kind} port of model server instance {i}; "
                    "choose another port or set SAGEMAKER_SAFE_PORT_RANGE to a range without it",
                )
