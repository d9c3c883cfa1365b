"""A small closed-loop load generator (N threads, each sending requests back to back), and what
every benchmark shares: its options and its report."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parents[2] / "perf-results"

# A worker factory returns a per-thread callable that sends one request and raises on failure.
WorkerFactory = Callable[[], Callable[[], None]]


@dataclass
class LoadResult:
    concurrency: int
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def run_load(
    factory: WorkerFactory, concurrency: int, seconds: float = 5.0, warmup_requests: int = 5
) -> LoadResult:
    """Run `concurrency` closed loops for `seconds`; latency percentiles over all requests."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors = [0] * concurrency
    start_gate = threading.Barrier(concurrency + 1)
    stop_at = [0.0]

    def loop(i: int) -> None:
        send = factory()
        for _ in range(warmup_requests):
            send()
        start_gate.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                send()
            except Exception:
                errors[i] += 1
                continue
            latencies[i].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + 3600
    start_gate.wait()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    for thread in threads:
        thread.join(seconds + 120)
    elapsed = time.perf_counter() - began
    flat = np.array([x for per in latencies for x in per]) * 1000
    count = int(flat.size)
    return LoadResult(
        concurrency=concurrency,
        requests=count,
        errors=sum(errors),
        seconds=round(elapsed, 3),
        rps=round(count / elapsed, 1),
        p50_ms=round(float(np.percentile(flat, 50)), 3) if count else float("nan"),
        p99_ms=round(float(np.percentile(flat, 99)), 3) if count else float("nan"),
    )


def bench_arguments(
    description: str | None, name: str, seconds: float | None = 5.0
) -> argparse.ArgumentParser:
    """The options every benchmark takes: --out (the repository's perf-results/<name>.json)
    and, unless `seconds` is None, --seconds (each point's duration)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if seconds is not None:
        parser.add_argument("--seconds", type=float, default=seconds, help="duration of each point")
    parser.add_argument("--out", type=Path, default=RESULTS / f"{name}.json")
    return parser


def new_report(**fields: Any) -> dict[str, Any]:
    """A report that starts with the host's CPU count and the start time."""
    return {"host_cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields}


def write_report(report: dict, path: str | Path) -> Path:
    """Write a benchmark's results as indented JSON (creating its folder) and say where."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return out
