"""What an environment of its own costs user code (environments/), in one run.

A pass-through inference.py on half_plus_three, served three ways: (a) in the service's
workers (no requirements.txt); (b) in handler processes of its own, forced by a code/lib
module the service uses (no install: the cost of the processes alone); (c) with
`numpy==1.26.4` in requirements.txt (pip, then handler processes). For each: start-up to the
first /ping 200, requests/s with wrk at concurrency 16 (ratios against (a)), and the resident
memory of the processes that run the handlers. Then a multi-model endpoint: load time and
memory of a model with the numpy pin against one with inference.py alone, and the pinned
one loaded again after an unload (its environment kept).
Writes perf-results/user_environments.json.

    .venv/bin/python test/perf/bench_user_environments.py [--seconds 10]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import psutil
import requests

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # test/, for conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
import wrk_load
from loadgen import bench_arguments, new_report, write_report

from conftest import serve_stack

PASS_THROUGH = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
"""
PINNED = "import numpy\n" + PASS_THROUGH
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
CONCURRENCY = 16
WAYS = {
    "in_workers": ({}, PASS_THROUGH),
    "own_processes": ({"lib/crc32c.py": "VALUE = 1\n"}, PASS_THROUGH),
    "numpy_pin": ({"requirements.txt": "numpy==1.26.4\n"}, PINNED),
}


def model(root: Path, files: dict[str, str], code: str) -> Path:
    import example_models as em

    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    (root / "code").mkdir(parents=True)
    (root / "code" / "inference.py").write_text(code)
    for name, text in files.items():
        (root / "code" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "code" / name).write_text(text)
    return root


def handler_rss_mib(server, marker: str) -> dict[str, float]:
    """Resident memory of the processes that run handlers: gunicorn's workers, and the
    handler processes (their master included)."""
    root = psutil.Process(server.proc.pid)
    sizes: dict[str, float] = {"gunicorn_workers": 0.0, "handler_processes": 0.0}
    processes = {p.pid: p for p in root.children(recursive=True)}
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            processes[proc.pid] = proc
    for proc in processes.values():
        command = " ".join(proc.cmdline())
        rss = proc.memory_info().rss / 2**20
        if "environments.host" in command:
            sizes["handler_processes"] += rss
        elif "sagemaker_serving.python_service" in command and proc.parent().pid != root.pid:
            sizes["gunicorn_workers"] += rss
    return {k: round(v, 1) for k, v in sizes.items()}


def one_way(tmp: Path, name: str, seconds: float) -> dict:
    files, code = WAYS[name]
    models = model(tmp / name / "model", files, code)
    started = time.monotonic()
    with serve_stack(models, tmp / name) as server:
        ready = time.monotonic() - started
        url = f"{server.url}/invocations"
        requests.post(url, data=BODY, timeout=60).raise_for_status()
        wrk_load.post(url, BODY, "application/json", CONCURRENCY, 2)  # warm-up
        result = wrk_load.post(url, BODY, "application/json", CONCURRENCY, seconds)
        if result.errors:
            raise SystemExit(f"{name}: {result.errors} failed requests")
        memory = handler_rss_mib(server, str(tmp / name))
    print(
        f"{name:>14}: ready in {ready:5.1f} s, {result.rps:8.1f} req/s (p50 {result.p50_ms:.2f} ms)"
        f", handler memory {memory}"
    )
    return {"ready_seconds": round(ready, 2), "load": result.as_dict(), "rss_mib": memory}


def multi_model(tmp: Path) -> dict:
    root = tmp / "mme"
    model(root / "plain", {}, PASS_THROUGH)
    model(root / "pinned", {"requirements.txt": "numpy==1.26.4\n"}, PINNED)
    (tmp / "mme-run").mkdir()
    out: dict = {}
    with serve_stack(root, tmp / "mme-run", {"SAGEMAKER_MULTI_MODEL": "true"}) as server:
        for name in ("plain", "pinned"):
            before = handler_rss_mib(server, str(root))
            started = time.monotonic()
            reply = requests.post(
                f"{server.url}/models",
                json={"model_name": name, "url": str(root / name)},
                timeout=600,
            )
            reply.raise_for_status()
            seconds = time.monotonic() - started
            requests.post(f"{server.url}/models/{name}/invoke", data=BODY, timeout=60)
            after = handler_rss_mib(server, str(root))
            out[name] = {
                "load_seconds": round(seconds, 2),
                "handler_processes_mib": round(
                    after["handler_processes"] - before["handler_processes"], 1
                ),
            }
            print(f"multi-model load of {name:>6}: {seconds:5.1f} s, {out[name]}")
        requests.delete(f"{server.url}/models/pinned", timeout=120).raise_for_status()
        started = time.monotonic()
        reply = requests.post(
            f"{server.url}/models",
            json={"model_name": "pinned", "url": str(root / "pinned")},
            timeout=600,
        )
        reply.raise_for_status()
        out["pinned_again_seconds"] = round(time.monotonic() - started, 2)
        again = out["pinned_again_seconds"]
        print(f"multi-model load of pinned again (its environment kept): {again} s")
    return out


def main() -> None:
    parser = bench_arguments(__doc__, "user_environments", seconds=10.0)
    args = parser.parse_args()
    report = new_report()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name in WAYS:
            report[name] = one_way(tmp, name, args.seconds)
        report["multi_model"] = multi_model(tmp)
    base = report["in_workers"]["load"]["rps"]
    for name in ("own_processes", "numpy_pin"):
        ratio = round(report[name]["load"]["rps"] / base, 3)
        report[f"ratio_{name}_over_in_workers"] = ratio
        print(f"{name} / in_workers, c={CONCURRENCY}: {ratio:.2f}")
    write_report(report, args.out)


if __name__ == "__main__":
    main()
