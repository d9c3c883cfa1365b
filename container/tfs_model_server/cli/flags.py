"""tensorflow_model_server's command line: the same flag names, defaults and syntax.

TF's flag parser takes `--name=value` (and bare `--name` for booleans); we also take
`--name value`. Flags that mean nothing for this server are accepted and, when set to
something other than their default, ignored with a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from tfs_model_server.errors import invalid_argument
from tfs_model_server.options import FlagError, ServerOptions

log = logging.getLogger(__name__)


# Flags of tensorflow_model_server that have no effect in this server, with their defaults.
IGNORED_FLAGS: dict[str, Any] = {
    "flush_filesystem_caches": True,
    "platform_config_file": "",
    "remove_unused_fields_from_bundle_metagraph": True,
    "num_tflite_interpreters_per_pool": 1,
    "xla_cpu_compilation_enabled": False,
    "xla_gpu_compilation_enabled": False,
    "skip_initialize_tpu": False,
    "thread_pool_factory_config_file": "",
    "grpc_health_check_period_ms": 0,
}

# One line of `--help` per flag (what it does here).
FLAG_HELP: dict[str, str] = {
    "port": "gRPC port (0: none; then --grpc_socket_path is needed)",
    "grpc_socket_path": "also serve gRPC on this unix socket",
    "rest_api_port": "REST (HTTP/JSON) port (0: no REST API)",
    "rest_api_num_threads": "threads that run REST requests",
    "rest_api_timeout_in_ms": "deadline of a REST request; past it the answer is a 504",
    "rest_api_enable_cors_support": "CORS headers on REST answers",
    "enable_batching": "merge concurrent requests for one model into batches",
    "allow_version_labels_for_unavailable_models": "labels may name versions not loaded yet",
    "batching_parameters_file": "text-format BatchingParameters (needs --enable_batching)",
    "enable_per_model_batching_parameters": (
        "each version's own batching_params.pbtxt (a version without one is not batched)"
    ),
    "model_config_file": "text-format ModelServerConfig: the models to serve (model_config_list)",
    "model_config_file_poll_wait_seconds": "re-read --model_config_file this often (0: never)",
    "model_name": "name of the model served from --model_base_path",
    "model_base_path": "directory of one model's numbered versions",
    "num_load_threads": "threads that load versions after the start (0: one at a time)",
    "num_unload_threads": "threads that unload versions (0: one at a time)",
    "max_num_load_retries": "retries of a version whose load failed",
    "load_retry_interval_micros": "wait between two load retries, in microseconds",
    "file_system_poll_wait_seconds": "look for new and removed versions this often",
    "tensorflow_session_parallelism": (
        "threads of both TensorFlow pools when neither flag below is set (0: TF chooses)"
    ),
    "tensorflow_intra_op_parallelism": "threads that run one op (0: TensorFlow chooses)",
    "tensorflow_inter_op_parallelism": "threads that run ops side by side (0: TF chooses)",
    "tensorflow_session_config_file": "text-format ConfigProto for every model's session",
    "ssl_config_file": "gRPC over TLS from a text-format SSLConfig (REST stays plaintext)",
    "per_process_gpu_memory_fraction": "GPU memory each session may take (0: TF's default)",
    "use_alts_credentials": "refused when true: ALTS exists only on Google Cloud",
    "enable_grpc_healthcheck_service": "the standard gRPC health service (grpc.health.v1)",
    "enable_profiler": "TensorFlow's profiler service on the gRPC port",
    "mixed_precision": "bfloat16: oneDNN's bfloat16 auto mixed precision (where the CPU has it)",
    "saved_model_tags": "comma-separated MetaGraph tags to load",
    "prefer_tflite_model": "serve a version's model.tflite when it has one (else its SavedModel)",
    "use_tflite_model": "TF Serving's older flag: serve model.tflite; a version without fails",
    "num_tflite_pools": "TFLite interpreters per model version (concurrent runs; at least 1)",
    "tflite_num_threads": "threads of each TFLite interpreter (ours; TF Serving uses 1)",
    "enable_tflite_xnnpack_delegate": "TFLite's XNNPACK delegate on each interpreter (ours)",
    "grpc_channel_arguments": "gRPC server arguments, key=value,...",
    "grpc_max_threads": "gRPC worker threads",
    "enable_model_warmup": "replay assets.extra/tf_serving_warmup_requests when a version loads",
    "num_request_iterations_for_warmup": "times each warmup record is replayed",
    "monitoring_config_file": "text-format MonitoringConfig: Prometheus metrics on the REST port",
    "enable_signature_method_name_check": "signatures must have the method name of the API",
    "version": "print the versions and exit",
    "bind_address": "address both servers bind (ours; tensorflow_model_server binds all)",
    # accepted so that command lines written for tensorflow_model_server run unchanged
    "flush_filesystem_caches": "accepted, ignored here: nothing to flush",
    "platform_config_file": "accepted, ignored here: TensorFlow models only",
    "remove_unused_fields_from_bundle_metagraph": "accepted, ignored here",
    "num_tflite_interpreters_per_pool": (
        "accepted, ignored here: TF Serving's batching inside a TFLite session (same answers)"
    ),
    "xla_cpu_compilation_enabled": "accepted, ignored here: no XLA compilation",
    "xla_gpu_compilation_enabled": "accepted, ignored here: no XLA compilation",
    "skip_initialize_tpu": "accepted, ignored here: no TPUs",
    "thread_pool_factory_config_file": "accepted, ignored here: TensorFlow's own thread pools",
    "grpc_health_check_period_ms": "accepted, ignored here",
}

_OPTIONS = [f for f in fields(ServerOptions) if f.name not in ("ignored", "unknown")]
_DEFAULTS = {f.name: f.default for f in _OPTIONS}
_TYPES = {f.name: type(f.default) for f in _OPTIONS}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _convert(name: str, kind: type, raw: str | None) -> Any:
    if kind is bool:
        if raw is None or raw in ("true", "1"):
            return True
        if raw in ("false", "0"):
            return False
        raise FlagError(f"Illegal value for flag --{name}: '{raw}' (expected true or false)")
    if raw is None:
        raise FlagError(f"Missing value for flag --{name}")
    if kind is int:
        try:
            value = int(raw, 10)
        except ValueError:
            raise FlagError(
                f"Illegal value for flag --{name}: '{raw}' (expected an integer)"
            ) from None
        if name != "load_retry_interval_micros" and not _INT32_MIN <= value <= _INT32_MAX:
            raise FlagError(f"Illegal value for flag --{name}: '{raw}' (out of int32 range)")
        return value
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise FlagError(
                f"Illegal value for flag --{name}: '{raw}' (expected a number)"
            ) from None
    return raw


def _type_name(name: str, default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int64" if name == "load_retry_interval_micros" else "int32"
    return "float" if isinstance(default, float) else "string"


def _shown(default: Any) -> str:
    if isinstance(default, bool):
        return str(default).lower()
    return f'"{default}"' if isinstance(default, str) else str(default)


def usage(program: str = "tfs-model-server") -> str:
    """The usage text, as tensorflow_model_server's: a line per flag with its default, its
    type and what it does (those accepted only for compatibility say so)."""
    lines = [f"usage: {program}", "Flags:"]
    for name, default in {**_DEFAULTS, **IGNORED_FLAGS}.items():
        flag = f"--{name}={_shown(default)}"
        lines.append(f"\t{flag:<44}\t{_type_name(name, default)}\t{FLAG_HELP[name]}")
    return "\n".join(lines)


def parse(argv: Sequence[str]) -> ServerOptions:
    """Parse argv (without the program name) into ServerOptions, or raise FlagError for a
    flag's bad value. Other arguments are kept in `unknown`, as tensorflow::Flags::Parse
    passes them through (everything after `--` too)."""
    options = ServerOptions()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            options.unknown += args[i - 1 :]
            break
        name, eq, raw = arg[2:].partition("=")
        value: str | None = raw if eq else None
        kind = _TYPES.get(name) or (type(IGNORED_FLAGS[name]) if name in IGNORED_FLAGS else None)
        if not arg.startswith("--") or kind is None:
            options.unknown.append(arg)
            continue
        if value is None and kind is not bool:
            if i >= len(args):
                raise FlagError(f"Missing value for flag --{name}")
            value = args[i]
            i += 1
        converted = _convert(name, kind, value)
        if name in IGNORED_FLAGS:
            options.ignored[name] = converted
        else:
            setattr(options, name, converted)
    return options


def validate(options: ServerOptions) -> None:
    """Cross-flag rules tensorflow_model_server enforces at start-up: FlagError for a value
    of ours, TF's INVALID_ARGUMENT (a ServingError) for what its BuildAndStart refuses."""
    if options.version:
        return
    if options.port == 0 and not options.grpc_socket_path:
        raise invalid_argument(
            "At least one of server_options.grpc_port or server_options.grpc_socket_path must "
            "be set."
        )
    if not options.model_base_path and not options.model_config_file:
        raise invalid_argument(
            "Both server_options.model_base_path and server_options.model_config_file are empty!"
        )
    if options.batching_parameters_file and not options.enable_batching:
        raise invalid_argument(
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true."
        )
    for name in ("port", "rest_api_port"):
        if not 0 <= getattr(options, name) <= 65535:
            raise FlagError(f"Illegal value for flag --{name}: {getattr(options, name)}")
    for name in ("rest_api_num_threads", "grpc_max_threads"):
        if getattr(options, name) <= 0:
            raise FlagError(f"Illegal value for flag --{name}: must be positive")
    if options.tflite_num_threads < -1:
        raise FlagError(
            f"Illegal value for flag --tflite_num_threads: {options.tflite_num_threads} "
            "(-1: TFLite chooses)"
        )
    for name in ("num_load_threads", "num_unload_threads"):
        if getattr(options, name) < 0:
            raise FlagError(f"Illegal value for flag --{name}: must not be negative")
    for name, value in options.ignored.items():
        if value != IGNORED_FLAGS[name]:
            log.info(
                "Flag --%s=%s is accepted for compatibility and has no effect here", name, value
            )
