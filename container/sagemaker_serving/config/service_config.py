"""What serve tells the Python service: a JSON file in the run directory, read by its master and
each worker. Every setting the service reads comes through it (its command line names the file
and the descriptors it inherits, nothing else)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sagemaker_serving.config.settings import (
    DEFAULT_ENVIRONMENT_MAX_DISK_MB,
    DEFAULT_GUNICORN_THREADS,
    DEFAULT_PIP_MAX_MEMORY_MB,
)


@dataclass(frozen=True)
class ServiceConfig:
    """What serve tells the service (written as JSON into the run directory)."""

    code_dir: str
    default_model: str
    rest_ports: list[int]
    grpc_ports: list[int]
    request_timeout_seconds: float
    max_response_bytes: int | None = None  # SAGEMAKER_MAX_RESPONSE_SIZE
    models: list[str] = field(default_factory=list)  # each AVAILABLE for /ping (single model)
    # gunicorn: its unix socket, its workers, how long a silent worker lives, its log level
    socket_path: str = ""
    workers: int = 1
    worker_timeout_seconds: int = 30
    log_level: str = "info"
    python_paths: list[str] = field(default_factory=list)
    # where handlers run (service/placement.py): SAGEMAKER_GUNICORN_WORKER_CLASS and _THREADS
    worker_class: str = "uvicorn"
    threads: int = DEFAULT_GUNICORN_THREADS
    # multi-model endpoints (multimodel/)
    multi_model: bool = False
    model_root: str = ""
    state_dir: str = ""
    load_timeout_seconds: float = 300.0
    memory_reserve_bytes: int = 0
    # user code environments (environments/): a single-model endpoint's handler pool folder
    # (empty: its handlers run in the workers, python_paths first), the folder of links every
    # environment layers on, and for multi-model models of their own: processes per pool and
    # the most such models
    handler_pool: str = ""
    container_site: str = ""
    handler_processes: int = 1
    max_environments: int = 8
    pip_max_memory_mb: int = DEFAULT_PIP_MAX_MEMORY_MB  # a requirements.txt install's bounds
    environment_max_disk_mb: int = DEFAULT_ENVIRONMENT_MAX_DISK_MB
    lifeline_fd: int | None = None  # EOF once serve is gone (pools started by workers end)
    log_format: str = "text"
    error_file: str = ""  # a worker that cannot import the handlers says why there, for serve
    run_dir: str = ""  # serve's: no answer names it (errors.hide_paths)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_file(cls, path: Path) -> ServiceConfig:
        return cls(**json.loads(path.read_text()))
