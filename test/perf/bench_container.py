"""Container benchmark: half_plus_three predict direct to the model server vs the front door.

One `serve` stack (nginx + njs fast path in front of ONE tfs-model-server instance, started
exactly like the integration tests do), and for each concurrency 1, 16 and 64:
  (a) direct:     POST http://127.0.0.1:<rest_port>/v1/models/half_plus_three:predict
  (b) front door: POST http://127.0.0.1:<port>/invocations (Content-Type application/json)
both with {"instances": [1.0, 2.0, 5.0]}, run back to back (direct, then front door) so the
two sides of each ratio see the same machine state. Reported: requests/s, p50, p99 and the
ratio (b)/(a) of requests/s per concurrency (the target at concurrency 16 is >= 0.8).

Everything is measured in this one run on this machine; only the ratios are meant to be
compared. The closed-loop load generator (test/perf/loadgen.py) is Python threads in this
process, sharing the host's (2) cores and the GIL with nginx and the model server, so the
absolute numbers are lower than a dedicated load generator would show. That is accepted.

Any failed request (non-200 or connection error) is counted and printed, and makes the run
exit non-zero (after the JSON is written).

  .venv/bin/python test/perf/bench_container.py [--seconds 5] [--out perf-results/...json]
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # test/, for conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from loadgen import bench_arguments, new_report, run_load, write_report

import example_models as em
from conftest import serve_stack

MODEL = "half_plus_three"
BODY = json.dumps({"instances": [1.0, 2.0, 5.0]}).encode()
EXPECTED = {"predictions": [3.5, 4.0, 5.5]}
CONCURRENCIES = (1, 16, 64)
WARMUP_REQUESTS = 5
TARGET_C16 = 0.8


class Failures:
    """Thread-safe count of failed requests (including warmup) with a few sample messages."""

    def __init__(self) -> None:
        self.count = 0
        self.samples: list[str] = []
        self._lock = threading.Lock()

    def add(self, message: str) -> None:
        with self._lock:
            self.count += 1
            if len(self.samples) < 5:
                self.samples.append(message)


def rest_worker(
    port: int,
    path: str,
    body: bytes | Sequence[bytes],
    failures: Failures,
    content_type: str = "application/json",
):
    """One keep-alive HTTPConnection per thread; a non-200 reply raises (run_load counts it).

    `body` is one body, or several sent in turn (each thread starts at a different one).
    Warmup failures are recorded but not raised: run_load's warmup is outside its try, and a
    thread dying there would leave its start barrier waiting forever.
    """
    bodies = [body] if isinstance(body, bytes) else list(body)
    threads = itertools.count()

    def factory():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        calls = [0]
        offset = next(threads) * 7

        def send() -> None:
            calls[0] += 1
            try:
                payload = bodies[(offset + calls[0]) % len(bodies)]
                conn.request("POST", path, payload, {"Content-Type": content_type})
                reply = conn.getresponse()
                data = reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"{reply.status} {data[:200]!r}")
            except Exception as exc:
                conn.close()  # the next request reconnects
                failures.add(f"{path}: {type(exc).__name__}: {exc}")
                if calls[0] > WARMUP_REQUESTS:
                    raise

        return send

    return factory


def model_dir(dest: Path) -> Path:
    """`dest` as SageMaker unpacks a model: MODEL (half_plus_three), version 1."""
    em.half_plus_three_tf1(dest / MODEL, versions=(1,))
    return dest


def preflight(port: int, path: str) -> None:
    """One request with the answer checked, so a broken endpoint fails before any load."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, BODY, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        data = reply.read()
    finally:
        conn.close()
    if reply.status != 200 or json.loads(data) != EXPECTED:
        raise SystemExit(f"preflight POST :{port}{path} -> {reply.status} {data[:500]!r}")


def bench(model_dir: Path, tmp: Path, seconds: float) -> dict:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL, "SAGEMAKER_TFS_INSTANCE_COUNT": "1"}
    points = []
    with serve_stack(model_dir, tmp, env, instances=1) as server:
        endpoints = {
            "direct": (server.rest_ports[0], f"/v1/models/{MODEL}:predict"),
            "front_door": (server.port, "/invocations"),
        }
        for port, path in endpoints.values():
            preflight(port, path)
        for concurrency in CONCURRENCIES:
            point: dict = {"concurrency": concurrency}
            for side, (port, path) in endpoints.items():  # direct, then front door
                failures = Failures()
                factory = rest_worker(port, path, BODY, failures)
                result = run_load(factory, concurrency, seconds, WARMUP_REQUESTS).as_dict()
                result["failed_requests"] = failures.count  # measured + warmup failures
                result["failure_samples"] = failures.samples
                point[side] = result
            direct_rps = point["direct"]["rps"]
            point["ratio_rps"] = (
                round(point["front_door"]["rps"] / direct_rps, 3) if direct_rps else None
            )
            points.append(point)
            print(_row(point), flush=True)
        if server.proc.poll() is not None:
            raise SystemExit(f"serve exited during the run:\n{server.log()[-3000:]}")
    return {"points": points}


HEADER = (
    f"{'c':>3} | {'direct req/s':>12} {'p50 ms':>7} {'p99 ms':>7} {'err':>4} | "
    f"{'front req/s':>12} {'p50 ms':>7} {'p99 ms':>7} {'err':>4} | {'front/direct':>12}"
)


def _row(point: dict) -> str:
    cells = []
    for side in ("direct", "front_door"):
        r = point[side]
        cells.append(
            f"{r['rps']:>12.1f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['failed_requests']:>4}"
        )
    ratio = point["ratio_rps"]
    ratio_text = f"{ratio:.2f}" if ratio is not None else "n/a"
    if point["concurrency"] == 16:
        ratio_text += f" (target >= {TARGET_C16})"
    return f"{point['concurrency']:>3} | {cells[0]} | {cells[1]} | {ratio_text:>12}"


def main() -> None:
    args = bench_arguments(__doc__, "container").parse_args()
    report = new_report(
        seconds_per_point=args.seconds,
        model=MODEL,
        body=BODY.decode(),
        model_server_instances=1,
        target_ratio_c16=TARGET_C16,
    )
    print(
        f"{MODEL} predict, {args.seconds:g} s per point, 1 model server instance, "
        f"{os.cpu_count()} CPUs shared with the Python load generator"
    )
    print(HEADER)
    print("-" * len(HEADER))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = model_dir(root / "model")
        stack_tmp = root / "stack"
        stack_tmp.mkdir()
        report.update(bench(models, stack_tmp, args.seconds))
    by_c = {p["concurrency"]: p for p in report["points"]}
    report["ratio_c16"] = by_c[16]["ratio_rps"]
    failed = {
        f"c={p['concurrency']} {side}": p[side]["failed_requests"]
        for p in report["points"]
        for side in ("direct", "front_door")
        if p[side]["failed_requests"]
    }
    report["failed_requests_total"] = sum(failed.values())
    write_report(report, args.out)
    ratio_c16 = report["ratio_c16"]
    print(
        "front door / direct requests/s at concurrency 16: "
        f"{f'{ratio_c16:.2f}x' if ratio_c16 is not None else 'n/a'} (target >= {TARGET_C16})"
    )
    print(f"failed requests: {report['failed_requests_total']}")
    if failed:
        samples: list[str] = []
        for p in report["points"]:
            for side in ("direct", "front_door"):
                samples.extend(p[side]["failure_samples"])
        details = "\n  ".join(samples[:10])
        raise SystemExit(f"FAILED: requests failed {failed}\n  {details}")


if __name__ == "__main__":
    main()
