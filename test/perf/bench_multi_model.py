"""Multi-model endpoint benchmark: load time of a small model, and invoke requests/s in
multi-model mode against single-model mode for the same model, in one run.

half_plus_three (`{"instances": [1.0, 2.0, 5.0]}`): (a) POST /models + DELETE, timed, N times;
(b) POST /models/<name>/invoke at concurrency 16 on a multi-model stack; (c) POST
/invocations at concurrency 16 on a single-model stack (the njs fast path). Prints the load
time (median, p90) and the ratio (b)/(c); writes perf-results/multi_model.json.

    .venv/bin/python test/perf/bench_multi_model.py [--seconds 5] [--loads 20]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import requests

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # test/, for conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from bench_container import MODEL, model_dir, preflight
from bench_python_service import measure
from loadgen import bench_arguments, new_report, write_report

from conftest import serve_stack

CONCURRENCY = 16


def load_times(url: str, model_url: Path, count: int) -> list[float]:
    times = []
    for i in range(count):
        started = time.perf_counter()
        reply = requests.post(
            f"{url}/models", json={"model_name": f"t{i}", "url": str(model_url)}, timeout=300
        )
        times.append(time.perf_counter() - started)
        if reply.status_code != 200:
            raise SystemExit(f"load failed: {reply.status_code} {reply.text}")
        requests.delete(f"{url}/models/t{i}", timeout=300).raise_for_status()
    return times


def main() -> None:
    parser = bench_arguments(__doc__, "multi_model")
    parser.add_argument("--loads", type=int, default=20)
    args = parser.parse_args()
    report = new_report()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        single = model_dir(tmp / "single")
        multi = tmp / "multi"
        model_dir(multi / "m" / "model")
        (tmp / "run-multi").mkdir()
        (tmp / "run-single").mkdir()
        env = {"SAGEMAKER_MULTI_MODEL": "true"}
        with serve_stack(multi, tmp / "run-multi", env) as server:
            times = load_times(server.url, multi / "m", args.loads)
            report["load_seconds"] = {
                "count": len(times),
                "median": round(statistics.median(times), 4),
                "p90": round(sorted(times)[int(0.9 * (len(times) - 1))], 4),
            }
            reply = requests.post(
                f"{server.url}/models", json={"model_name": MODEL, "url": "m"}, timeout=300
            )
            reply.raise_for_status()
            path = f"/models/{MODEL}/invoke"
            preflight(server.port, path)
            report["multi_model"] = measure(server.port, path, CONCURRENCY, args.seconds)
        with serve_stack(single, tmp / "run-single", {}) as server:
            preflight(server.port, "/invocations")
            report["single_model"] = measure(server.port, "/invocations", CONCURRENCY, args.seconds)
    ratio = round(report["multi_model"]["rps"] / report["single_model"]["rps"], 3)
    report["ratio_c16_multi_over_single"] = ratio
    load = report["load_seconds"]
    print(f"load time of {MODEL}: median {load['median'] * 1000:.0f} ms, p90 "
          f"{load['p90'] * 1000:.0f} ms over {load['count']} loads")  # fmt: skip
    print(
        f"c={CONCURRENCY}: multi-model invoke {report['multi_model']['rps']:.1f} req/s, "
        f"single-model /invocations {report['single_model']['rps']:.1f} req/s, ratio {ratio:.2f}"
    )
    write_report(report, args.out)


if __name__ == "__main__":
    main()
