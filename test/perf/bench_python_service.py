"""Handler path benchmark: a pass-through inference.py vs a TF Serving request nginx passes
straight on (no user code) vs the model server.

half_plus_three predict (`{"instances": [1.0, 2.0, 5.0]}`) at concurrency 16 (and 1), in one
run on this machine; two stacks (no user code, and with code/inference.py), each measured against
its own model server directly. The Python load generator shares the CPUs with the servers, so
read the ratios, not the absolute numbers.

    .venv/bin/python test/perf/bench_python_service.py [--seconds 5] [--out perf-results/...]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from bench_container import (
    BODY,
    MODEL,
    WARMUP_REQUESTS,
    Failures,
    model_dir,
    preflight,
    rest_worker,
)
from loadgen import bench_arguments, new_report, run_load, write_report

from conftest import serve_stack

PASS_THROUGH = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, context.accept_header
"""
CONCURRENCIES = (1, 16)
TARGET_C16 = 0.6


def measure(port: int, path: str, concurrency: int, seconds: float) -> dict:
    failures = Failures()
    result = run_load(
        rest_worker(port, path, BODY, failures), concurrency, seconds, WARMUP_REQUESTS
    )
    point = result.as_dict()
    point["failed_requests"] = failures.count
    if failures.count:
        raise SystemExit(f"{failures.count} requests failed: {failures.samples}")
    return point


def bench_stack(model_dir: Path, tmp: Path, seconds: float, label: str) -> dict:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL}
    out: dict = {}
    with serve_stack(model_dir, tmp, env, instances=1) as server:
        direct = (server.rest_ports[0], f"/v1/models/{MODEL}:predict")
        front = (server.port, "/invocations")
        preflight(*direct)
        preflight(*front)
        for c in CONCURRENCIES:
            d = measure(*direct, c, seconds)
            f = measure(*front, c, seconds)
            out[c] = {"direct": d, label: f, "ratio": round(f["rps"] / d["rps"], 3)}
            print(
                f"{label:>13} c={c:>2}: direct {d['rps']:8.1f} req/s (p50 {d['p50_ms']:.2f} ms)"
                f" | {label} {f['rps']:8.1f} req/s (p50 {f['p50_ms']:.2f} ms, p99 "
                f"{f['p99_ms']:.2f} ms) | ratio {out[c]['ratio']:.2f}",
                flush=True,
            )
    return out


def main() -> None:
    args = bench_arguments(__doc__, "python_service").parse_args()
    report = new_report()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        fast = model_dir(tmp / "fast")
        handler = model_dir(tmp / "handler")
        (handler / "code").mkdir()
        (handler / "code" / "inference.py").write_text(PASS_THROUGH)
        (tmp / "run-fast").mkdir()
        (tmp / "run-handler").mkdir()
        report["fast_path"] = bench_stack(fast, tmp / "run-fast", args.seconds, "fast path")
        report["inference_py"] = bench_stack(
            handler, tmp / "run-handler", args.seconds, "inference.py"
        )
    c16 = report["inference_py"][16]["ratio"]
    report["ratio_c16_inference_py_over_direct"] = c16
    report["ratio_c16_fast_path_over_direct"] = report["fast_path"][16]["ratio"]
    print(
        f"pass-through inference.py / direct requests/s at c=16: {c16:.2f} (target >= {TARGET_C16})"
    )
    print(f"fast path / direct requests/s at c=16: {report['ratio_c16_fast_path_over_direct']:.2f}")
    write_report(report, args.out)


if __name__ == "__main__":
    main()
