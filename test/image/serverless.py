"""SageMaker Serverless Inference's container profile, as `docker run` options and settings
(docs/hosting-modes.md#serverless-endpoints): a read-only root with a writable /tmp, an
arbitrary non-root user, no capabilities and no privilege gain, 1 GiB of memory, one worker of
each process kind, and the 4 MB payload limit."""

from __future__ import annotations

FOUR_MB = 4 * 1024 * 1024
OPTIONS = {
    "read_only": True,
    "tmpfs": {"/tmp": ""},
    "user": "12345:0",
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges"],
    "mem_limit": "1g",
}
ENV = {
    "SAGEMAKER_GUNICORN_WORKERS": "1",
    "SAGEMAKER_NGINX_WORKER_PROCESSES": "1",
    "SAGEMAKER_MAX_REQUEST_SIZE": str(FOUR_MB),
}
