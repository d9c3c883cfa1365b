"""The model server's options: tensorflow_model_server's flags, parsed (cli/flags.py parses them;
the server, its session and its TLS read them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

_CPUS = os.cpu_count() or 1


class FlagError(ValueError):
    """A bad command line: unknown flag or a value of the wrong form."""


@dataclass
class ServerOptions:
    """Parsed flags. Field names are tensorflow_model_server's flag names."""

    port: int = 8500
    grpc_socket_path: str = ""
    rest_api_port: int = 0
    rest_api_num_threads: int = 4 * _CPUS
    rest_api_timeout_in_ms: int = 30000
    rest_api_enable_cors_support: bool = False
    enable_batching: bool = False
    allow_version_labels_for_unavailable_models: bool = False
    batching_parameters_file: str = ""
    enable_per_model_batching_parameters: bool = False
    model_config_file: str = ""
    model_config_file_poll_wait_seconds: int = 0
    model_name: str = "default"
    model_base_path: str = ""
    num_load_threads: int = 0
    num_unload_threads: int = 0
    max_num_load_retries: int = 5
    load_retry_interval_micros: int = 60 * 1000 * 1000
    file_system_poll_wait_seconds: int = 1
    tensorflow_session_parallelism: int = 0
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0
    tensorflow_session_config_file: str = ""
    ssl_config_file: str = ""
    per_process_gpu_memory_fraction: float = 0.0
    use_alts_credentials: bool = False
    enable_grpc_healthcheck_service: bool = False
    enable_profiler: bool = True
    mixed_precision: str = ""
    saved_model_tags: str = "serve"
    # TFLite models (core/tflite_servable.py); tflite_num_threads and
    # enable_tflite_xnnpack_delegate are ours, use_tflite_model TF Serving's older flag.
    prefer_tflite_model: bool = False
    use_tflite_model: bool = False
    num_tflite_pools: int = _CPUS
    tflite_num_threads: int = 1
    enable_tflite_xnnpack_delegate: bool = False
    grpc_channel_arguments: str = ""
    grpc_max_threads: int = 4 * _CPUS
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 0
    monitoring_config_file: str = ""
    enable_signature_method_name_check: bool = False
    version: bool = False
    # Our extension: the address both servers bind (TF Serving binds every interface).
    bind_address: str = "0.0.0.0"
    # Accepted for compatibility; they change nothing here.
    ignored: dict[str, Any] = field(default_factory=dict)
    # Arguments that are no flag of ours: TF Serving names the first and starts anyway.
    unknown: list[str] = field(default_factory=list)


def grpc_channel_arguments(text: str) -> list[tuple[str, int | str]]:
    """`k=v,k=v` into gRPC server options (integers where they parse)."""
    result: list[tuple[str, int | str]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise FlagError(f"Illegal value for flag --grpc_channel_arguments: '{item}'")
        try:
            result.append((key, int(value)))
        except ValueError:
            result.append((key, value))
    return result
