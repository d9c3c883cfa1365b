"""One large x-npy request (an asynchronous endpoint's, up to 1 GiB) through the stack: its
answer, time, and the stack's peak memory over its idle footprint, as a multiple of the body.

The stack's memory is the sum of its processes' resident sets (proportional set sizes, so
memory they share counts once), sampled every 50 ms from before the request to its answer.

    .venv/bin/python test/perf/bench_large_body.py [--mib 1024] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (REPO / "test", REPO / "test" / "support"):
    sys.path.insert(0, str(path))

import psutil  # noqa: E402

from conftest import serve_stack  # noqa: E402
from large_bodies import PeakSampler, npy_file, post_npy  # noqa: E402


def part(proc: psutil.Process) -> str:
    """Which part of the stack a process is."""
    line = " ".join(proc.cmdline())
    for name in ("nginx", "python_service", "tfs-model-server", "tensorflow_model_server"):
        if name in line:
            return name
    return "serve and the rest"


def stack_memory(pid: int) -> dict[str, int]:
    """The stack's memory in bytes by part: serve and every descendant, each page counted once
    (PSS)."""
    parts: dict[str, int] = {}
    root = psutil.Process(pid)
    for proc in (root, *root.children(recursive=True)):
        try:
            name = part(proc)
            parts[name] = parts.get(name, 0) + proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--json", type=Path, default=REPO / "perf-results" / "large-body.json")
    args = parser.parse_args()
    import example_models as em

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = work / "model"
        em.variable_length(model_dir / "sums", 1)
        body = work / "body.npy"
        rows, total = npy_file(body, args.mib)
        size = body.stat().st_size
        env = {
            "SAGEMAKER_MAX_REQUEST_SIZE": str(size),
            "SAGEMAKER_MODEL_SERVER_TIMEOUT": "900",
        }
        with serve_stack(model_dir, work, env) as server:
            pid = server.proc.pid
            idle_parts = stack_memory(pid)
            idle = sum(idle_parts.values())
            sampler = PeakSampler(lambda: stack_memory(pid))
            sampler.start()
            started = time.monotonic()
            reply = post_npy(server.url, body)
            took = time.monotonic() - started
            sampler.stop()
            answer = reply.json() if reply.status_code == 200 else reply.text[:500]
            sums = answer["predictions"] if isinstance(answer, dict) else None
            correct = (
                sums is not None and len(sums) == rows and abs(sum(sums) - total) < 1e-3 * total
            )
            result = {
                "body_bytes": size,
                "status": reply.status_code,
                "answer_correct": correct,
                "seconds": round(took, 1),
                "idle_mib": round(idle / 2**20),
                "peak_mib": round(sampler.peak / 2**20),
                "peak_over_idle_per_body": round((sampler.peak - idle) / size, 2),
                "over_idle_per_body_by_part": {
                    name: round((used - idle_parts.get(name, 0)) / size, 2)
                    for name, used in sampler.at_peak.items()
                },
                "own_peak_over_idle_per_body_by_part": {
                    name: round((used - idle_parts.get(name, 0)) / size, 2)
                    for name, used in sampler.part_peaks.items()
                },
            }
            if not correct:
                result["answer"] = str(answer)[:300]
        print(json.dumps(result))
        args.json.parent.mkdir(exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
