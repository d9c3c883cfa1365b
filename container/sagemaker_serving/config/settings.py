"""Container settings: every environment variable the container reads, parsed and validated once.

Each variable is declared once, as a field of `Settings`: `env(name, parser, default)` and, under
it, the field's docstring (its meaning, the words of docs/settings.md). `Settings.from_env` (the
only place that reads the environment) and the table in docs/settings.md
(scripts/settings_table.py, from `VARIABLES`) are derived from those declarations. A variable
that is unset, empty or only whitespace takes its default; a bad value raises `SettingsError`
whose message starts with the variable's name.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import math
import os
import re
import shlex
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sagemaker_serving.config.batch_parameters import (
    CONTAINER_SPELLING,
    DEFAULT_BATCH_STRATEGY,
    DEFAULT_MAX_PAYLOAD_IN_MB,
    MAX_PAYLOAD_IN_MB,
    MAX_TOTAL_PAYLOAD_IN_MB,
    MIB,
    strategy_name,
)
from sagemaker_serving.config.log_setup import LOG_FORMATS
from sagemaker_serving.config.routing_rules import MODEL_NAME_PATTERN, MODEL_NAME_RULE
from sagemaker_serving.errors import StartupError

DEFAULT_BODY_LIMIT_MB = MAX_PAYLOAD_IN_MB  # the largest body a Batch Transform job sends
MAX_BODY_BYTES = 1 << 30  # 1 GiB: an asynchronous endpoint's largest request
MAX_INVOCATION_SECONDS = 3600  # an asynchronous endpoint's longest invocation
DEFAULT_GUNICORN_TIMEOUT = 30
DEFAULT_PROXY_READ_TIMEOUT = 60
BATCH_MAX_ENQUEUED_BATCHES = 100_000_000
NGINX_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
GUNICORN_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
GUNICORN_WORKER_CLASSES = ("uvicorn", "gthread", "sync", "gevent")
DEFAULT_GUNICORN_THREADS = 8
DEFAULT_PIP_MAX_MEMORY_MB = 2048  # pip needs about 130 MiB (numpy==1.26.4, measured)
DEFAULT_ENVIRONMENT_MAX_DISK_MB = 4096
DEFAULT_GRPC_PORT = 9000  # the model servers' ports without SAGEMAKER_SAFE_PORT_RANGE
DEFAULT_REST_PORT = 8501


class SettingsError(StartupError):
    """A bad environment variable; the message starts with the variable's name."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")


# How a variable's text becomes its value: a parser returns the value (None for text that counts
# as unset) or raises BadValue saying what was expected (Variable.read names the variable).
Parser = Callable[[str], Any]  # a variable's stripped, non-empty text -> its value

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_SECONDS = INT32_MAX // 1000  # seconds whose milliseconds still fit in an int32
_INTEGER = re.compile(r"[+-]?[0-9]+")
_PORT_RANGE = re.compile(r"([0-9]+)\s*-\s*([0-9]+)")


class BadValue(ValueError):
    """What a variable's text should have been, and what it was."""

    def __init__(self, expected: str, raw: str) -> None:
        super().__init__(f"expected {expected}, got {raw!r}")


def _expected_int(minimum: int, maximum: int, value: int | None) -> str:
    """What an integer variable accepts, phrased for the value that was given."""
    if maximum <= 65535:
        return f"an integer from {minimum} to {maximum}"
    kind = {0: "a non-negative integer", 1: "a positive integer"}[minimum]
    return f"{kind} no larger than {maximum}" if value is not None and value > maximum else kind


def integer(minimum: int, maximum: int) -> Parser:
    """A decimal integer (an optional sign, ASCII digits) from minimum to maximum."""

    def parse(raw: str) -> int:
        value = int(raw) if _INTEGER.fullmatch(raw) else None
        if value is None or not minimum <= value <= maximum:
            raise BadValue(_expected_int(minimum, maximum, value), raw)
        return value

    return parse


def boolean(raw: str) -> bool:
    """true or false, in any case."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise BadValue("true or false", raw)


def tf_boolean(raw: str) -> bool:
    """A boolean as TensorFlow reads it (0, 1, true, false; any case): TensorFlow aborts the
    process on anything else."""
    if raw.lower() in ("1", "true", "0", "false"):
        return raw.lower() in ("1", "true")
    raise BadValue("0, 1, true or false", raw)


def choice(choices: tuple[str, ...]) -> Parser:
    """One of `choices`, in any case (answered in lower case)."""

    def parse(raw: str) -> str:
        if raw.lower() in choices:
            return raw.lower()
        raise BadValue(f"one of {', '.join(choices)}", raw)

    return parse


def fraction(raw: str) -> float:
    """A number x with 0 <= x < 1."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:  # also rejects NaN
        raise BadValue("a number with 0 <= x < 1", raw)
    return value


def port_range(raw: str) -> tuple[int, int]:
    """`low-high`, inclusive ports with 1 <= low <= high <= 65535."""
    match = _PORT_RANGE.fullmatch(raw)
    if match is None:
        raise BadValue("'low-high' (for example '9000-9999')", raw)
    low, high = int(match[1]), int(match[2])
    if not 1 <= low <= high <= 65535:
        raise BadValue("ports 1 <= low <= high <= 65535", raw)
    return low, high


def model_name(raw: str) -> str | None:
    """A model name (routing_rules' rule); `None` counts as unset."""
    if raw == "None":
        return None
    if not MODEL_NAME_PATTERN.fullmatch(raw):
        raise BadValue(f"a model name ({MODEL_NAME_RULE})", raw)
    return raw


def container_strategy(raw: str) -> str:
    """MULTI_RECORD or SINGLE_RECORD, also spelled as the API does (MultiRecord)."""
    try:
        return CONTAINER_SPELLING[strategy_name(raw)]
    except ValueError:
        raise BadValue(" or ".join(CONTAINER_SPELLING.values()), raw) from None


def text(raw: str) -> str:
    """Any text (stripped)."""
    return raw


_FLAG = re.compile(r"--[a-z][a-z0-9_]*(=.*)?", re.DOTALL)


def flags(raw: str) -> tuple[str, ...]:
    """Command-line flags, shell-quoted where needed: each `--name=value` or `--name`."""
    try:
        items = shlex.split(raw)
    except ValueError as exc:
        raise BadValue(f"flags as a shell would split them ({exc})", raw) from None
    for item in items:
        if not _FLAG.fullmatch(item):
            raise BadValue("--name=value flags, separated by blanks", item)
    return tuple(items)


@dataclass(frozen=True)
class Computed:
    """A default that is no single value: `compute` gets the values of the other settings (and
    `cpu_count`); `text` says what it is in docs/settings.md."""

    text: str
    compute: Callable[[Mapping[str, Any]], Any] = lambda _values: None


PER_CPU = Computed("number of CPUs", lambda v: v["cpu_count"])
HALF_CPUS = Computed("half the CPUs, at least 1", lambda v: max(1, v["cpu_count"] // 2))
FIRST_MODEL = Computed("first model by name")  # model discovery picks it
ENQUEUED_BATCHES = Computed(
    f"number of CPUs; {BATCH_MAX_ENQUEUED_BATCHES} in batch transform",
    lambda v: BATCH_MAX_ENQUEUED_BATCHES if v["batch"] else v["cpu_count"],
)
HANDLER_PROCESSES = Computed(
    "gunicorn workers; 1 per model on a multi-model endpoint",
    lambda v: 1 if v["multi_model"] else v["gunicorn_workers"],
)


def _invocation_timeout(default: int) -> Computed:
    return Computed(
        f"SAGEMAKER_MODEL_SERVER_TIMEOUT, else {default}",
        lambda v: v["model_server_timeout_seconds"] or default,
    )


SYSTEM_ALLOCATOR = Computed(
    "`1` multi-model, else unset", lambda v: True if v["multi_model"] else None
)

# parsers that several variables share
PORT = integer(1, 65535)
POSITIVE = integer(1, INT32_MAX)
NON_NEGATIVE = integer(0, INT32_MAX)
SECONDS = integer(1, MAX_SECONDS)


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, how its text is parsed, its default, its meaning."""

    name: str
    parse: Parser
    default: Any
    doc: str = ""

    @property
    def default_text(self) -> str:
        """docs/settings.md's Default column."""
        if isinstance(self.default, Computed):
            return self.default.text
        return "unset" if self.default is None else str(self.default).lower()

    def read(self, env: Mapping[str, str]) -> Any:
        """The parsed value; None when unset, empty, only whitespace or a parser's 'unset'."""
        raw = (env.get(self.name) or "").strip()
        if not raw:
            return None
        try:
            return self.parse(raw)
        except BadValue as exc:
            raise SettingsError(self.name, str(exc)) from None


def env(name: str, parse: Parser, default: Any) -> Any:
    """A Settings field read from environment variable `name`; its docstring is its meaning."""
    return field(metadata={"variable": Variable(name, parse, default)})


@dataclass(frozen=True)
class Settings:
    """Validated container settings; build with `Settings.from_env`. In docs/settings.md's
    order."""

    cpu_count: int  # os.cpu_count(), at least 1

    bind_to_port: int = env("SAGEMAKER_BIND_TO_PORT", PORT, 8080)
    """port nginx listens on (all interfaces)"""
    safe_port_range: tuple[int, int] | None = env("SAGEMAKER_SAFE_PORT_RANGE", port_range, None)
    """`low-high` (inclusive): internal ports; model server instance i gets gRPC low+2i and REST
    low+2i+1 (unset: gRPC 9000+i, REST 8501+i)"""
    multi_model: bool = env("SAGEMAKER_MULTI_MODEL", boolean, False)
    """`true`: multi-model endpoint (models loaded on request)"""
    default_model_name: str | None = env(
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME", model_name, FIRST_MODEL
    )
    """model used when a request names none (`None` counts as unset)"""
    enable_batching: bool = env("SAGEMAKER_TFS_ENABLE_BATCHING", boolean, False)
    """`true`: server-side batching in the model server"""
    max_batch_size: int = env("SAGEMAKER_TFS_MAX_BATCH_SIZE", integer(1, INT64_MAX), 8)
    """batching `max_batch_size`"""
    batch_timeout_micros: int = env(
        "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", integer(0, INT64_MAX), 1000
    )
    """batching `batch_timeout_micros`"""
    num_batch_threads: int = env("SAGEMAKER_TFS_NUM_BATCH_THREADS", POSITIVE, PER_CPU)
    """batching `num_batch_threads`"""
    max_enqueued_batches: int = env(
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES", integer(1, INT64_MAX), ENQUEUED_BATCHES
    )
    """batching `max_enqueued_batches`"""
    batch: bool = env("SAGEMAKER_BATCH", boolean, False)
    """`true`: running as a batch transform job (set by SageMaker)"""
    instance_count: int = env("SAGEMAKER_TFS_INSTANCE_COUNT", POSITIVE, 1)
    """model server processes (single-model mode)"""
    gpu_memory_margin: float = env("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", fraction, 0.2)
    """GPU memory left free when several model servers share a GPU (0 <= x < 1)"""
    inter_op_parallelism: int = env("SAGEMAKER_TFS_INTER_OP_PARALLELISM", NON_NEGATIVE, 0)
    """TensorFlow inter-op threads (0: automatic)"""
    intra_op_parallelism: int = env("SAGEMAKER_TFS_INTRA_OP_PARALLELISM", NON_NEGATIVE, 0)
    """TensorFlow intra-op threads (0: automatic)"""
    model_server_flags: tuple[str, ...] = env("SAGEMAKER_TFS_MODEL_SERVER_FLAGS", flags, ())
    """more flags for every model server instance, as a shell would split them, e.g.
    `--rest_api_num_threads=16 --enable_model_warmup=false`: flags the model server's `--help`
    lists, none of those serve sets itself; after serve's own, so `--rest_api_timeout_in_ms`
    wins over SAGEMAKER_MODEL_SERVER_TIMEOUT's"""
    wait_time_seconds: int = env("SAGEMAKER_TFS_WAIT_TIME_SECONDS", SECONDS, 300)
    """how long to wait for a model server to be ready"""
    nginx_log_level: str = env("SAGEMAKER_TFS_NGINX_LOGLEVEL", choice(NGINX_LOG_LEVELS), "error")
    """nginx error log level: debug, info, notice, warn, error, crit, alert, emerg"""
    tfs_version: str | None = env("SAGEMAKER_TFS_VERSION", text, None)
    """informational TensorFlow Serving version"""
    gunicorn_workers: int = env("SAGEMAKER_GUNICORN_WORKERS", POSITIVE, PER_CPU)
    """gunicorn worker processes (Python service); the AWS container's default was 1"""
    gunicorn_threads: int = env("SAGEMAKER_GUNICORN_THREADS", POSITIVE, DEFAULT_GUNICORN_THREADS)
    """handler threads per gunicorn worker: at most this many handler calls at once"""
    gunicorn_worker_class: str = env(
        "SAGEMAKER_GUNICORN_WORKER_CLASS", choice(GUNICORN_WORKER_CLASSES), "uvicorn"
    )
    """where handlers run; every worker is uvicorn's event loop: uvicorn (a handler moves from
    the worker's threads to the loop once 16 calls in a row were quick and did not wait, and
    back for good when 3 calls within 32 hold the loop over 2 ms by themselves or one over
    100 ms), gthread (always on the threads), sync (one handler call at a time per worker),
    gevent (as uvicorn; the AWS container's default)"""
    gunicorn_log_level: str = env(
        "SAGEMAKER_GUNICORN_LOGLEVEL", choice(GUNICORN_LOG_LEVELS), "info"
    )
    """gunicorn log level: debug, info, warning, error, critical"""
    model_server_timeout_seconds: int | None = env(
        "SAGEMAKER_MODEL_SERVER_TIMEOUT", integer(1, MAX_INVOCATION_SECONDS), None
    )
    """seconds one invocation may take, 1 to 3600 (asynchronous endpoints): the one deadline
    nginx, gunicorn, the handlers and the model server follow (the two settings below, when
    set, override it for their part)"""
    gunicorn_timeout_seconds: int = env(
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", SECONDS, _invocation_timeout(DEFAULT_GUNICORN_TIMEOUT)
    )
    """gunicorn worker timeout"""
    log_format: str = env("SAGEMAKER_LOG_FORMAT", choice(LOG_FORMATS), "text")
    """`json`: serve, the Python service and nginx's access log write one JSON object per line
    (with `request_id` while a request is handled); `text`: plain lines"""
    log_ping: bool = env("SAGEMAKER_LOG_PING", boolean, True)
    """`false`: nginx's access log leaves out `/ping`, which SageMaker asks every few seconds
    (/metrics still counts it)"""
    nginx_proxy_read_timeout_seconds: int = env(
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS",
        SECONDS,
        _invocation_timeout(DEFAULT_PROXY_READ_TIMEOUT),
    )
    """nginx proxy read timeout; raised to the gunicorn timeout when that is larger, and used as
    the model server REST deadline"""
    nginx_client_timeout_seconds: int = env("SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS", SECONDS, 10)
    """nginx: time for a client to send the whole request header, and the longest gap while it
    sends a body or reads an answer; a slower client is disconnected"""
    nginx_worker_processes: int = env("SAGEMAKER_NGINX_WORKER_PROCESSES", POSITIVE, HALF_CPUS)
    """nginx worker processes; half the CPUs leaves the rest to the model server and the Python
    service (on 2 CPUs, a TF Serving request's requests/s through nginx over the model
    server's own were 2-19 % higher with one worker than with two, in 6 paired runs)"""
    nginx_max_connections_per_client: int = env(
        "SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT", integer(1, 1_000_000), 1024
    )
    """nginx: requests in progress per client address (more are answered 429)"""
    universal_bucket: str | None = env("SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET", text, None)
    """S3 bucket of inference code shared by all models (used with the prefix)"""
    universal_prefix: str | None = env("SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX", text, None)
    """S3 prefix of shared inference code"""
    mme_memory_reserve_mb: int = env("SAGEMAKER_MME_MEMORY_RESERVE_MB", integer(0, 2**40), 256)
    """multi-model: memory kept free; a load that would not fit in the rest is refused (507)"""
    handler_processes: int = env("SAGEMAKER_HANDLER_PROCESSES", POSITIVE, HANDLER_PROCESSES)
    """processes that run handlers whose code brings its own copy of a package the service
    uses (its own environment), per environment"""
    pip_max_memory_mb: int = env(
        "SAGEMAKER_PIP_MAX_MEMORY_MB", integer(1, 2**30), DEFAULT_PIP_MAX_MEMORY_MB
    )
    """address space (MiB) of each process of a `requirements.txt` install (pip, a package's
    build); past it the install fails, saying so (pip itself needs about 130 MiB)"""
    environment_max_disk_mb: int = env(
        "SAGEMAKER_ENVIRONMENT_MAX_DISK_MB", integer(1, 2**30), DEFAULT_ENVIRONMENT_MAX_DISK_MB
    )
    """size on disk (MiB) of the environment a `requirements.txt` installs into (also the
    largest file pip may write); pip is stopped past it and the install fails, saying so"""
    mme_max_environments: int = env("SAGEMAKER_MME_MAX_ENVIRONMENTS", POSITIVE, 8)
    """multi-model: the most models loaded at once whose code/ brings packages of its own
    (each has its own environment and handler processes); more are refused (507)"""
    onednn_system_allocator: bool | None = env(
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR", tf_boolean, SYSTEM_ALLOCATOR
    )
    """for the model servers, when TensorFlow runs oneDNN (its default on x86 CPUs with
    AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX): `1` (or `true`) malloc, so an unloaded model's
    memory leaves the process; `0` (or `false`) TensorFlow's pool, which never shrinks but spares
    large batches their page faults"""
    max_payload_in_mb: int | None = env(
        "SAGEMAKER_MAX_PAYLOAD_IN_MB", integer(0, MAX_PAYLOAD_IN_MB), None
    )
    """batch transform payload limit in MB, 0 to 100 (0: unlimited, sent chunked); also the
    request body limit in MiB when SAGEMAKER_MAX_REQUEST_SIZE is unset (unset or 0: 100 MiB);
    /execution-parameters says 6 if unset"""
    max_request_size: int | None = env(
        "SAGEMAKER_MAX_REQUEST_SIZE", integer(1, MAX_BODY_BYTES), None
    )
    """largest request body in bytes, up to 1073741824 (1 GiB, asynchronous endpoints); a larger
    one is answered 413 (unset: SAGEMAKER_MAX_PAYLOAD_IN_MB's limit)"""
    max_response_size: int | None = env(
        "SAGEMAKER_MAX_RESPONSE_SIZE", integer(1, MAX_BODY_BYTES), None
    )
    """largest answer body in bytes, up to 1073741824 (1 GiB); a larger one is answered 500,
    saying so (unset: no limit of its own)"""
    batch_strategy: str | None = env("SAGEMAKER_BATCH_STRATEGY", container_strategy, None)
    """batch transform strategy: `MULTI_RECORD` or `SINGLE_RECORD` (also `MultiRecord`,
    `SingleRecord`); /execution-parameters says `MULTI_RECORD` if unset"""
    max_concurrent_transforms: int | None = env(
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", POSITIVE, None
    )
    """batch transform concurrent requests; /execution-parameters says CPUs x instances, at most
    100 / MaxPayloadInMB, if unset"""
    omp_num_threads: str = env("OMP_NUM_THREADS", text, "1")
    """OpenMP threads of the model server and Python service"""

    @property
    def proxy_read_timeout_seconds(self) -> int:
        """nginx proxy_read_timeout: never below the gunicorn timeout, so nginx does not give
        up (504) on a request gunicorn still lets its worker finish."""
        return max(self.nginx_proxy_read_timeout_seconds, self.gunicorn_timeout_seconds)

    @property
    def body_limit_bytes(self) -> int:
        """Largest request body: SAGEMAKER_MAX_REQUEST_SIZE, else SAGEMAKER_MAX_PAYLOAD_IN_MB MiB
        when > 0, else 100 MiB."""
        if self.max_request_size:
            return self.max_request_size
        if self.max_payload_in_mb:
            return self.max_payload_in_mb * MIB
        return DEFAULT_BODY_LIMIT_MB * MIB

    def model_server_ports(self) -> list[tuple[int, int]]:
        """(gRPC, REST) ports of each model server instance: low+2i and low+2i+1 from
        SAGEMAKER_SAFE_PORT_RANGE, else 9000+i and 8501+i; never SAGEMAKER_BIND_TO_PORT."""
        count = self.instance_count
        if self.safe_port_range is not None:
            low, high = self.safe_port_range
            if low + 2 * count - 1 > high:
                raise SettingsError(
                    "SAGEMAKER_SAFE_PORT_RANGE",
                    f"{low}-{high} holds {(high - low + 1) // 2} gRPC/REST port pairs, but "
                    f"SAGEMAKER_TFS_INSTANCE_COUNT={count} model servers need {2 * count} ports",
                )
            ports = [(low + 2 * i, low + 2 * i + 1) for i in range(count)]
        else:
            if DEFAULT_REST_PORT + count > DEFAULT_GRPC_PORT:
                raise SettingsError(
                    "SAGEMAKER_TFS_INSTANCE_COUNT",
                    f"{count} model servers do not fit the default ports (REST from "
                    f"{DEFAULT_REST_PORT}, gRPC from {DEFAULT_GRPC_PORT}: at most "
                    f"{DEFAULT_GRPC_PORT - DEFAULT_REST_PORT}); set SAGEMAKER_SAFE_PORT_RANGE",
                )
            ports = [(DEFAULT_GRPC_PORT + i, DEFAULT_REST_PORT + i) for i in range(count)]
        for i, pair in enumerate(ports):
            if self.bind_to_port in pair:
                kind = "gRPC" if pair[0] == self.bind_to_port else "REST"
                raise SettingsError(
                    "SAGEMAKER_BIND_TO_PORT",
                    f"port {self.bind_to_port} is also the {kind} port of model server instance "
                    f"{i}; choose another port or set SAGEMAKER_SAFE_PORT_RANGE to a range "
                    "without it",
                )
        return ports

    def execution_parameters(self) -> dict[str, int | str]:
        """GET /execution-parameters, which Batch Transform asks before a job: the SAGEMAKER_*
        values when set, else MaxConcurrentTransforms one request per CPU per model server,
        capped so that concurrency x payload <= 100 MB."""
        payload = self.max_payload_in_mb
        if payload is None:
            payload = DEFAULT_MAX_PAYLOAD_IN_MB
        concurrency = self.max_concurrent_transforms
        if concurrency is None:
            concurrency = max(1, self.cpu_count * self.instance_count)
            if payload > 0:
                concurrency = min(concurrency, MAX_TOTAL_PAYLOAD_IN_MB // payload)
        return {
            "MaxConcurrentTransforms": concurrency,
            "BatchStrategy": self.batch_strategy or CONTAINER_SPELLING[DEFAULT_BATCH_STRATEGY],
            "MaxPayloadInMB": payload,
        }

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, cpu_count: int | None = None
    ) -> Settings:
        """Parse `env` (default os.environ); `cpu_count` defaults to os.cpu_count()."""
        env = os.environ if env is None else env
        cpus = max(1, cpu_count if cpu_count is not None else (os.cpu_count() or 1))
        values: dict[str, Any] = {"cpu_count": cpus}
        computed: dict[str, Computed] = {}
        for name, variable in _VARIABLES_BY_FIELD.items():
            value = variable.read(env)
            if value is None and isinstance(variable.default, Computed):
                computed[name] = variable.default  # after every value it may depend on
            else:
                values[name] = variable.default if value is None else value
        for name, default in computed.items():
            values[name] = default.compute(values)
        return cls(**values)


def _field_docs(cls: type) -> dict[str, str]:
    """{field: its docstring, on one line}: the string right under each annotated field."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _variables(cls: type) -> dict[str, Variable]:
    """{field: its Variable, with its docstring}, in field order."""
    docs = _field_docs(cls)
    return {
        f.name: replace(f.metadata["variable"], doc=docs.get(f.name, ""))
        for f in fields(cls)
        if "variable" in f.metadata
    }


_VARIABLES_BY_FIELD = _variables(Settings)
# Every variable the container reads, in docs/settings.md order (scripts/settings_table.py).
VARIABLES: tuple[Variable, ...] = tuple(_VARIABLES_BY_FIELD.values())
