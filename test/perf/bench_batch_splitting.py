"""What large batch splitting would do for MultiRecord image jobs: the model server alone.

A TFRecord MultiRecord request of the ResNet-50 image job is one model server task of as many
images as fit in MaxPayloadInMB (~70 at 1 MB), so with batching on, max_batch_size must be at
least that and the model runs batches of ~70, slower per image on CPU than small batches.
TF Serving's `enable_large_batch_splitting` with `max_execution_batch_size` runs such a task
as several small batches. This sends the bodies the classic TFRecord inference.py sends
({"instances": [{"b64": ...}] x --request-size}) straight to `tfs-model-server` :predict, from
--concurrency threads, with the batching parameters of each configuration, and prints images/s
and the model server's CPU ms per image. (The container's settings do not expose splitting.)

    .venv/bin/python test/perf/bench_batch_splitting.py [--request-size 71] [--requests 3]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the container sets it for the model server

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # test/, for conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from bench_batch_images import MODEL, Interference, cij  # noqa: E402
from loadgen import bench_arguments, new_report, write_report  # noqa: E402

from conftest import model_server  # noqa: E402


def configs(size: int, timeout_us: int) -> dict[str, dict[str, Any]]:
    base = {
        "max_batch_size": size,
        "batch_timeout_micros": timeout_us,
        "num_batch_threads": os.cpu_count() or 1,
        "max_enqueued_batches": 100000000,
    }
    split = {**base, "enable_large_batch_splitting": "true"}
    return {
        f"no splitting (batches of up to {size})": base,
        "splitting, max_execution_batch_size 8": {**split, "max_execution_batch_size": 8},
        "splitting, max_execution_batch_size 16": {**split, "max_execution_batch_size": 16},
    }


def batching_file(path: Path, params: dict[str, Any]) -> Path:
    path.write_text("".join(f"{k} {{ value: {v} }}\n" for k, v in params.items()))
    return path


def bodies(data: Any, size: int) -> list[bytes]:
    """Predict bodies of `size` images each, as the classic TFRecord inference.py builds them."""
    jpegs = [data.jpeg_bytes(i) for i in range(len(data.names))]
    return [
        json.dumps(
            {"instances": [{"b64": base64.b64encode(j).decode()} for j in jpegs[i : i + size]]}
        ).encode()
        for i in range(0, len(jpegs) - size + 1, size)
    ]


def post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        reply.read()


def drive(url: str, payloads: list[bytes], threads: int, per_thread: int) -> float:
    """Each thread posts `per_thread` bodies back to back; seconds for all of them."""
    errors: list[BaseException] = []

    def loop(offset: int) -> None:
        try:
            for k in range(per_thread):
                post(url, payloads[(offset + k) % len(payloads)])
        except BaseException as err:
            errors.append(err)

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(1800)
    if errors or any(w.is_alive() for w in workers):
        raise SystemExit(f"requests failed or hung: {errors[:1]}")
    return time.perf_counter() - started


def measure(name: str, params: dict, payloads: list[bytes], args: argparse.Namespace, tmp: Path):
    import psutil

    base = cij.cached_model(MODEL)
    batching = batching_file(tmp / f"batching-{len(os.listdir(tmp))}.config", params)
    server_args = [f"--model_name={MODEL}", f"--model_base_path={base}", "--enable_batching",
                   "--rest_api_timeout_in_ms=600000",
                   f"--batching_parameters_file={batching}"]  # fmt: skip
    with model_server(server_args, tmp / "server.log", MODEL) as server:
        url = f"{server.rest}/v1/models/{MODEL}:predict"
        drive(url, payloads, args.concurrency, 1)  # warm-up
        proc = psutil.Process(server.proc.pid)

        def cpu() -> float:
            times = proc.cpu_times()
            return times.user + times.system

        before = cpu()
        with Interference(cpu) as others:
            seconds = drive(url, payloads, args.concurrency, args.requests)
        images = args.concurrency * args.requests * args.request_size
        result = {
            "images_per_second": round(images / seconds, 2),
            "model_server_cpu_ms_per_image": round(1000 * (cpu() - before) / images, 2),
            "other_processes_cores": others.other_cores,
            "batching": params,
        }
    print(f"{name:>42}: {result['images_per_second']:6.2f} images/s, model server "
          f"{result['model_server_cpu_ms_per_image']} CPU ms/image, other processes "
          f"{result['other_processes_cores']} cores", flush=True)  # fmt: skip
    return result


def main() -> None:
    parser = bench_arguments(__doc__, "batch_splitting", seconds=None)
    parser.add_argument("--request-size", type=int, default=71, help="images per request")
    parser.add_argument("--requests", type=int, default=3, help="timed requests per thread")
    parser.add_argument("--concurrency", type=int, default=2, help="MaxConcurrentTransforms")
    parser.add_argument("--batch-timeout-micros", type=int, default=20000)
    args = parser.parse_args()
    report = new_report(args=vars(args), configs={})
    with tempfile.TemporaryDirectory(prefix="bench-splitting-") as tmp_name:
        tmp = Path(tmp_name)
        data = cij.build_dataset(tmp / "data", 4 * args.request_size, 1000)
        payloads = bodies(data, args.request_size)
        for name, params in configs(args.request_size, args.batch_timeout_micros).items():
            report["configs"][name] = measure(name, params, payloads, args, tmp)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
