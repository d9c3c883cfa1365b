"""Container settings: every environment variable the container reads, parsed and validated once.

`Settings.from_env` is the only place that reads the environment. A variable that is unset,
empty or only whitespace takes its default; a bad value raises `SettingsError` whose message
starts with the variable's name.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
MIB = 1024 * 1024
DEFAULT_BODY_LIMIT_MB = 100
BATCH_MAX_ENQUEUED_BATCHES = 100_000_000
NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
GUNICORN_WORKER_CLASSES = ("sync", "gthread", "gevent")
DEFAULT_GUNICORN_THREADS = 8
BATCH_STRATEGIES = ("MULTI_RECORD", "SINGLE_RECORD")
LOG_FORMATS = ("text", "json")

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MAX_SECONDS = _INT32_MAX // 1000  # seconds whose milliseconds still fit in an int32
_INTEGER = re.compile(r"[+-]?[0-9]+")
_PORT_RANGE = re.compile(r"([0-9]+)\s*-\s*([0-9]+)")


class SettingsError(ValueError):
    """A bad environment variable; the message starts with the variable's name."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


# (environment variable, default, meaning): the documentation of every variable, in README order.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("SAGEMAKER_BIND_TO_PORT", "8080", "port nginx listens on (all interfaces)"),
    (
        "SAGEMAKER_SAFE_PORT_RANGE",
        "unset",
        "`low-high` (inclusive): internal ports; model server instance i gets gRPC low+2i "
        "and REST low+2i+1 (unset: gRPC 9000+i, REST 8501+i)",
    ),
    ("SAGEMAKER_MULTI_MODEL", "false", "`true`: multi-model endpoint (models loaded on request)"),
    (
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME",
        "first model by name",
        "model used when a request names none (`None` counts as unset)",
    ),
    ("SAGEMAKER_TFS_ENABLE_BATCHING", "false", "`true`: server-side batching in the model server"),
    ("SAGEMAKER_TFS_MAX_BATCH_SIZE", "8", "batching `max_batch_size`"),
    ("SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", "1000", "batching `batch_timeout_micros`"),
    ("SAGEMAKER_TFS_NUM_BATCH_THREADS", "number of CPUs", "batching `num_batch_threads`"),
    (
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES",
        "number of CPUs; 100000000 in batch transform",
        "batching `max_enqueued_batches`",
    ),
    ("SAGEMAKER_BATCH", "false", "`true`: running as a batch transform job (set by SageMaker)"),
    ("SAGEMAKER_TFS_INSTANCE_COUNT", "1", "model server processes (single-model mode)"),
    (
        "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN",
        "0.2",
        "GPU memory left free when several model servers share a GPU (0 <= x < 1)",
    ),
    ("SAGEMAKER_TFS_INTER_OP_PARALLELISM", "0", "TensorFlow inter-op threads (0: automatic)"),
    ("SAGEMAKER_TFS_INTRA_OP_PARALLELISM", "0", "TensorFlow intra-op threads (0: automatic)"),
    ("SAGEMAKER_TFS_WAIT_TIME_SECONDS", "300", "how long to wait for a model server to be ready"),
    (
        "SAGEMAKER_TFS_NGINX_LOGLEVEL",
        "error",
        "nginx error log level: debug, info, notice, warn, error, crit, alert, emerg",
    ),
    ("SAGEMAKER_TFS_VERSION", "unset", "informational TensorFlow Serving version"),
    (
        "SAGEMAKER_GUNICORN_WORKERS",
        "number of CPUs",
        "gunicorn worker processes (Python service); the AWS container's default was 1",
    ),
    ("SAGEMAKER_GUNICORN_THREADS", "8", "threads per gunicorn worker (`gthread` only)"),
    (
        "SAGEMAKER_GUNICORN_WORKER_CLASS",
        "gthread",
        "gunicorn worker class: sync, gthread, gevent (gevent must be installed; the AWS "
        "container's default was gevent, which stalls on CPU-bound handlers)",
    ),
    (
        "SAGEMAKER_GUNICORN_LOGLEVEL",
        "info",
        "gunicorn log level: debug, info, warning, error, critical",
    ),
    ("SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", "30", "gunicorn worker timeout"),
    (
        "SAGEMAKER_LOG_FORMAT",
        "text",
        "`json`: serve, the Python service and nginx's access log write one JSON object per "
        "line (with `request_id` while a request is handled); `text`: plain lines",
    ),
    (
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS",
        "60",
        "nginx proxy read timeout; raised to the gunicorn timeout when that is larger, and "
        "used as the model server REST deadline",
    ),
    (
        "SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS",
        "10",
        "nginx: time for a client to send the whole request header, and the longest gap while "
        "it sends a body or reads an answer; a slower client is disconnected",
    ),
    (
        "SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT",
        "1024",
        "nginx: requests in progress per client address (more are answered 429)",
    ),
    (
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET",
        "unset",
        "S3 bucket of inference code shared by all models (used with the prefix)",
    ),
    ("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX", "unset", "S3 prefix of shared inference code"),
    (
        "SAGEMAKER_MME_MEMORY_RESERVE_MB",
        "256",
        "multi-model: memory kept free; a load that would not fit in the rest is refused (507)",
    ),
    (
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR",
        "`1` multi-model, else unset",
        "for the model servers, when TensorFlow runs oneDNN (its default on x86 CPUs with "
        "AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX): `1` (or `true`) malloc, so an unloaded "
        "model's memory leaves the process; `0` (or `false`) TensorFlow's pool, which never "
        "shrinks but spares large batches their page faults",
    ),
    (
        "SAGEMAKER_MAX_PAYLOAD_IN_MB",
        "unset",
        "batch transform payload limit in MB, 0 to 100 (0: unlimited, sent chunked); also the "
        "request body limit in MiB (unset or 0: 100 MiB); /execution-parameters says 6 if unset",
    ),
    (
        "SAGEMAKER_BATCH_STRATEGY",
        "unset",
        "batch transform strategy: `MULTI_RECORD` or `SINGLE_RECORD` (also `MultiRecord`, "
        "`SingleRecord`); /execution-parameters says `MULTI_RECORD` if unset",
    ),
    (
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS",
        "unset",
        "batch transform concurrent requests; /execution-parameters says CPUs x instances, "
        "at most 100 / MaxPayloadInMB, if unset",
    ),
    ("OMP_NUM_THREADS", "1", "OpenMP threads of the model server and Python service"),
)


def _env(name: str) -> Any:
    """A dataclass field read from environment variable `name`."""
    return field(metadata={"env": name})


@dataclass(frozen=True)
class Settings:
    """Validated container settings; build with `Settings.from_env`."""

    bind_to_port: int = _env("SAGEMAKER_BIND_TO_PORT")
    safe_port_range: tuple[int, int] | None = _env("SAGEMAKER_SAFE_PORT_RANGE")
    multi_model: bool = _env("SAGEMAKER_MULTI_MODEL")
    default_model_name: str | None = _env("SAGEMAKER_TFS_DEFAULT_MODEL_NAME")
    enable_batching: bool = _env("SAGEMAKER_TFS_ENABLE_BATCHING")
    max_batch_size: int = _env("SAGEMAKER_TFS_MAX_BATCH_SIZE")
    batch_timeout_micros: int = _env("SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS")
    num_batch_threads: int = _env("SAGEMAKER_TFS_NUM_BATCH_THREADS")
    max_enqueued_batches: int = _env("SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES")
    batch: bool = _env("SAGEMAKER_BATCH")
    instance_count: int = _env("SAGEMAKER_TFS_INSTANCE_COUNT")
    gpu_memory_margin: float = _env("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN")
    inter_op_parallelism: int = _env("SAGEMAKER_TFS_INTER_OP_PARALLELISM")
    intra_op_parallelism: int = _env("SAGEMAKER_TFS_INTRA_OP_PARALLELISM")
    wait_time_seconds: int = _env("SAGEMAKER_TFS_WAIT_TIME_SECONDS")
    nginx_log_level: str = _env("SAGEMAKER_TFS_NGINX_LOGLEVEL")
    tfs_version: str | None = _env("SAGEMAKER_TFS_VERSION")
    gunicorn_workers: int = _env("SAGEMAKER_GUNICORN_WORKERS")
    gunicorn_threads: int = _env("SAGEMAKER_GUNICORN_THREADS")
    gunicorn_worker_class: str = _env("SAGEMAKER_GUNICORN_WORKER_CLASS")
    gunicorn_log_level: str = _env("SAGEMAKER_GUNICORN_LOGLEVEL")
    gunicorn_timeout_seconds: int = _env("SAGEMAKER_GUNICORN_TIMEOUT_SECONDS")
    log_format: str = _env("SAGEMAKER_LOG_FORMAT")
    nginx_proxy_read_timeout_seconds: int = _env("SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS")
    nginx_client_timeout_seconds: int = _env("SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS")
    nginx_max_connections_per_client: int = _env("SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT")
    universal_bucket: str | None = _env("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET")
    universal_prefix: str | None = _env("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX")
    mme_memory_reserve_mb: int = _env("SAGEMAKER_MME_MEMORY_RESERVE_MB")
    max_payload_in_mb: int | None = _env("SAGEMAKER_MAX_PAYLOAD_IN_MB")
    batch_strategy: str | None = _env("SAGEMAKER_BATCH_STRATEGY")
    max_concurrent_transforms: int | None = _env("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS")
    onednn_system_allocator: bool | None = _env("TF_ONEDNN_USE_SYSTEM_ALLOCATOR")
    omp_num_threads: str = _env("OMP_NUM_THREADS")
    cpu_count: int = field()

    @property
    def proxy_read_timeout_seconds(self) -> int:
        """nginx proxy_read_timeout: never below the gunicorn timeout (reference #221)."""
        return max(self.nginx_proxy_read_timeout_seconds, self.gunicorn_timeout_seconds)

    @property
    def body_limit_bytes(self) -> int:
        """Largest request body: SAGEMAKER_MAX_PAYLOAD_IN_MB MiB when > 0, else 100 MiB."""
        if self.max_payload_in_mb:
            return self.max_payload_in_mb * MIB
        return DEFAULT_BODY_LIMIT_MB * MIB

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, cpu_count: int | None = None
    ) -> Settings:
        """Parse `env` (default os.environ); `cpu_count` defaults to os.cpu_count()."""
        env = os.environ if env is None else env
        cpus = max(1, cpu_count if cpu_count is not None else (os.cpu_count() or 1))
        batch = _bool(env, "SAGEMAKER_BATCH", False)
        multi_model = _bool(env, "SAGEMAKER_MULTI_MODEL", False)
        return cls(
            bind_to_port=_int(env, "SAGEMAKER_BIND_TO_PORT", 8080, 1, 65535),
            safe_port_range=_port_range(env, "SAGEMAKER_SAFE_PORT_RANGE"),
            multi_model=multi_model,
            default_model_name=_model_name(env, "SAGEMAKER_TFS_DEFAULT_MODEL_NAME"),
            enable_batching=_bool(env, "SAGEMAKER_TFS_ENABLE_BATCHING", False),
            max_batch_size=_int(env, "SAGEMAKER_TFS_MAX_BATCH_SIZE", 8, 1, _INT64_MAX),
            batch_timeout_micros=_int(
                env, "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", 1000, 0, _INT64_MAX
            ),
            num_batch_threads=_int(env, "SAGEMAKER_TFS_NUM_BATCH_THREADS", cpus, 1, _INT32_MAX),
            max_enqueued_batches=_int(
                env,
                "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES",
                BATCH_MAX_ENQUEUED_BATCHES if batch else cpus,
                1,
                _INT64_MAX,
            ),
            batch=batch,
            instance_count=_int(env, "SAGEMAKER_TFS_INSTANCE_COUNT", 1, 1, _INT32_MAX),
            gpu_memory_margin=_fraction(env, "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", 0.2),
            inter_op_parallelism=_int(env, "SAGEMAKER_TFS_INTER_OP_PARALLELISM", 0, 0, _INT32_MAX),
            intra_op_parallelism=_int(env, "SAGEMAKER_TFS_INTRA_OP_PARALLELISM", 0, 0, _INT32_MAX),
            wait_time_seconds=_int(env, "SAGEMAKER_TFS_WAIT_TIME_SECONDS", 300, 1, _MAX_SECONDS),
            nginx_log_level=_choice(env, "SAGEMAKER_TFS_NGINX_LOGLEVEL", "error", NGINX_LOG_LEVELS),
            tfs_version=_raw(env, "SAGEMAKER_TFS_VERSION"),
            gunicorn_workers=_int(env, "SAGEMAKER_GUNICORN_WORKERS", cpus, 1, _INT32_MAX),
            gunicorn_threads=_int(
                env, "SAGEMAKER_GUNICORN_THREADS", DEFAULT_GUNICORN_THREADS, 1, _INT32_MAX
            ),
            gunicorn_worker_class=_choice(
                env, "SAGEMAKER_GUNICORN_WORKER_CLASS", "gthread", GUNICORN_WORKER_CLASSES
            ),
            gunicorn_log_level=_choice(
                env, "SAGEMAKER_GUNICORN_LOGLEVEL", "info", GUNICORN_LOG_LEVELS
            ),
            gunicorn_timeout_seconds=_int(
                env, "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", 30, 1, _MAX_SECONDS
            ),
            log_format=_choice(env, "SAGEMAKER_LOG_FORMAT", "text", LOG_FORMATS),
            nginx_proxy_read_timeout_seconds=_int(
                env, "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS", 60, 1, _MAX_SECONDS
            ),
            nginx_client_timeout_seconds=_int(
                env, "SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS", 10, 1, _MAX_SECONDS
            ),
            nginx_max_connections_per_client=_int(
                env, "SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT", 1024, 1, 1_000_000
            ),
            universal_bucket=_raw(env, "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET"),
            universal_prefix=_raw(env, "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX"),
            mme_memory_reserve_mb=_int(env, "SAGEMAKER_MME_MEMORY_RESERVE_MB", 256, 0, 2**40),
            max_payload_in_mb=_optional_int(env, "SAGEMAKER_MAX_PAYLOAD_IN_MB", 0, 100),
            batch_strategy=_batch_strategy(env, "SAGEMAKER_BATCH_STRATEGY"),
            max_concurrent_transforms=_optional_int(
                env, "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", 1, _INT32_MAX
            ),
            onednn_system_allocator=_tf_bool(
                env, "TF_ONEDNN_USE_SYSTEM_ALLOCATOR", True if multi_model else None
            ),
            omp_num_threads=_raw(env, "OMP_NUM_THREADS") or "1",
            cpu_count=cpus,
        )


def _raw(env: Mapping[str, str], name: str) -> str | None:
    """The stripped value of `name`; None when unset, empty or only whitespace."""
    value = env.get(name)
    if value is None:
        return None
    return value.strip() or None


def _expected_int(minimum: int, maximum: int, value: int | None) -> str:
    """What an integer variable accepts, phrased for the value that was given."""
    if maximum <= 65535:
        return f"an integer from {minimum} to {maximum}"
    kind = {0: "a non-negative integer", 1: "a positive integer"}[minimum]
    return f"{kind} no larger than {maximum}" if value is not None and value > maximum else kind


def _optional_int(env: Mapping[str, str], name: str, minimum: int, maximum: int) -> int | None:
    raw = _raw(env, name)
    if raw is None:
        return None
    value = int(raw) if _INTEGER.fullmatch(raw) else None
    if value is None or not minimum <= value <= maximum:
        raise SettingsError(name, f"expected {_expected_int(minimum, maximum, value)}, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    value = _optional_int(env, name, minimum, maximum)
    return default if value is None else value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _raw(env, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise SettingsError(name, f"expected true or false, got {raw!r}")


def _tf_bool(env: Mapping[str, str], name: str, default: bool | None) -> bool | None:
    """A boolean as TensorFlow reads it (0, 1, true, false; any case): TensorFlow aborts
    the process on anything else."""
    raw = _raw(env, name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "0", "false"):
        return raw.lower() in ("1", "true")
    raise SettingsError(name, f"expected 0, 1, true or false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = _raw(env, name)
    if raw is None:
        return default
    if raw.lower() in choices:
        return raw.lower()
    raise SettingsError(name, f"expected one of {', '.join(choices)}, got {raw!r}")


def _fraction(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _raw(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:  # also rejects NaN
        raise SettingsError(name, f"expected a number with 0 <= x < 1, got {raw!r}")
    return value


def _port_range(env: Mapping[str, str], name: str) -> tuple[int, int] | None:
    raw = _raw(env, name)
    if raw is None:
        return None
    match = _PORT_RANGE.fullmatch(raw)
    if match is None:
        raise SettingsError(name, f"expected 'low-high' (for example '9000-9999'), got {raw!r}")
    low, high = int(match[1]), int(match[2])
    if not 1 <= low <= high <= 65535:
        raise SettingsError(name, f"expected ports 1 <= low <= high <= 65535, got {raw!r}")
    return low, high


def _model_name(env: Mapping[str, str], name: str) -> str | None:
    raw = _raw(env, name)
    if raw is None or raw == "None":
        return None
    if not MODEL_NAME_PATTERN.fullmatch(raw):
        raise SettingsError(
            name,
            f"expected a model name (letters, digits, '.', '_', '-', starting with a letter "
            f"or digit, at most 255 characters), got {raw!r}",
        )
    return raw


def _batch_strategy(env: Mapping[str, str], name: str) -> str | None:
    raw = _raw(env, name)
    if raw is None:
        return None
    key = raw.replace("_", "").lower()
    for strategy in BATCH_STRATEGIES:
        if key == strategy.replace("_", "").lower():
            return strategy
    raise SettingsError(name, f"expected MULTI_RECORD or SINGLE_RECORD, got {raw!r}")
