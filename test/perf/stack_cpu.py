"""CPU seconds of a running stack's processes, by part: nginx, the Python service, the model
servers and serve itself (psutil, from /proc)."""

from __future__ import annotations

from typing import Any

import psutil

PARTS = ("nginx", "python_service", "model_server")


def part_of(proc: Any) -> str:
    """Which part of the stack a process is."""
    try:
        text = " ".join(proc.cmdline()) or proc.name()
    except psutil.Error:
        return "gone"
    for needle, group in (
        ("tfs-model-server", "model_server"),
        ("tensorflow_model_server", "model_server"),
        ("gunicorn", "python_service"),
        ("sagemaker_serving.python_service", "python_service"),
        ("nginx", "nginx"),
    ):
        if needle in text:
            return group
    return "serve"


def cpu_by_part(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of `root_pid` and its descendants, by part."""
    root = psutil.Process(root_pid)
    totals: dict[str, float] = {}
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        part = part_of(proc)
        totals[part] = totals.get(part, 0.0) + times.user + times.system
    return totals
