"""What the scripts that run whole stacks (soak.py, mme_churn_soak.py, fuzz_stack.py) share:
their command line, and the resident memory of a running stack's processes by group. They put
test/, test/support and test/perf on sys.path before importing this."""

from __future__ import annotations

import argparse

import psutil
from loadgen import bench_arguments


def script_arguments(
    description: str | None, name: str, **options: float
) -> argparse.ArgumentParser:
    """bench_arguments(description, name, seconds=None) and one option a keyword (ping_every=0.05
    is --ping-every, a float that defaults to 0.05)."""
    parser = bench_arguments(description, name, seconds=None)
    for key, default in options.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(default), default=default)
    return parser


def process_groups(pid: int) -> dict[str, int]:
    """Resident bytes of the nginx, Python service and model server processes below `pid`."""
    groups = {"nginx": 0, "python-service": 0, "model-server": 0}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            rss = child.memory_info().rss
        except psutil.Error:
            continue
        if "nginx" in command:
            groups["nginx"] += rss
        elif "sagemaker_serving.python_service" in command:
            groups["python-service"] += rss
        elif "model-server" in command or "model_server" in command:
            groups["model-server"] += rss
    return groups
