"""Model server benchmark: REST vs gRPC on half_plus_three; batching off vs on on a conv model.

Everything is measured in this one run on this machine (ratios, not absolute targets):
  .venv/bin/python test/perf/bench_model_server.py [--seconds 5] [--out perf-results/...json]
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from loadgen import bench_arguments, new_report, run_load, write_report

import example_models as em
from model_server_process import ModelServerProcess

OUR_SERVER = str(Path(sys.executable).parent / "tfs-model-server")


def rest_worker(port: int, path: str, body: bytes):
    def factory():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def send() -> None:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            data = reply.read()
            if reply.status != 200:
                raise RuntimeError(f"{reply.status} {data[:200]!r}")

        return send

    return factory


def grpc_worker(target: str, request: predict_pb2.PredictRequest):
    channel = grpc.insecure_channel(target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def factory():
        def send() -> None:
            stub.Predict(request, timeout=60)

        return send

    return factory


def predict_request(name: str, alias: str, value: np.ndarray) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return request


def start(args: list[str], log: Path, model: str) -> ModelServerProcess:
    server = ModelServerProcess(args, log, executable=OUR_SERVER).start()
    if not server.wait_ready([model], 180):
        server.stop()
        raise SystemExit(f"server did not start:\n{server.log()[-2000:]}")
    return server


def bench_protocols(root: Path, seconds: float) -> dict:
    em.half_plus_three_tf1(root / "hp3", versions=(1,))
    server = start(
        [f"--model_base_path={root / 'hp3'}", "--model_name=hp3"], root / "hp3.log", "hp3"
    )
    results: dict = {"rest": [], "grpc": []}
    try:
        body = json.dumps({"instances": [1.0, 2.0, 5.0]}).encode()
        request = predict_request("hp3", "x", np.array([1.0, 2.0, 5.0], np.float32))
        for concurrency in (1, 8, 32):
            rest = run_load(
                rest_worker(server.rest_port, "/v1/models/hp3:predict", body), concurrency, seconds
            )
            grpc_result = run_load(grpc_worker(server.grpc_target, request), concurrency, seconds)
            results["rest"].append(rest.as_dict())
            results["grpc"].append(grpc_result.as_dict())
            print(
                f"half_plus_three c={concurrency:>2}  REST {rest.rps:>8.1f} req/s "
                f"p50 {rest.p50_ms:6.2f} ms p99 {rest.p99_ms:6.2f} ms | gRPC "
                f"{grpc_result.rps:>8.1f} req/s p50 {grpc_result.p50_ms:6.2f} ms "
                f"p99 {grpc_result.p99_ms:6.2f} ms | gRPC/REST {grpc_result.rps / rest.rps:.2f}"
            )
    finally:
        server.stop()
    return results


def bench_batching(root: Path, seconds: float) -> dict:
    em.conv_model(root / "conv", version=1)
    image = em.conv_example_batch(1)
    params = root / "batching.config"
    params.write_text(
        "max_batch_size { value: 32 }\nbatch_timeout_micros { value: 0 }\n"
        "max_enqueued_batches { value: 1000 }\nnum_batch_threads { value: 2 }\n"
    )
    results: dict = {}
    for mode, extra in (
        ("off", []),
        ("on", ["--enable_batching", f"--batching_parameters_file={params}"]),
    ):
        server = start(
            [f"--model_base_path={root / 'conv'}", "--model_name=conv", *extra],
            root / f"conv-{mode}.log",
            "conv",
        )
        try:
            meta_alias = _single_input_alias(server)
            request = predict_request("conv", meta_alias, image)
            results[mode] = {
                c: run_load(grpc_worker(server.grpc_target, request), c, seconds).as_dict()
                for c in (1, 16)
            }
        finally:
            server.stop()
        for c, r in results[mode].items():
            print(
                f"conv batching {mode:>3} c={c:>2}  {r['rps']:>8.1f} req/s "
                f"p50 {r['p50_ms']:6.2f} ms p99 {r['p99_ms']:6.2f} ms"
            )
    results["ratio_c16_on_over_off"] = round(
        results["on"][16]["rps"] / results["off"][16]["rps"], 3
    )
    results["ratio_c1_on_over_off"] = round(results["on"][1]["rps"] / results["off"][1]["rps"], 3)
    results["batch1_call_p50_ms"] = results["off"][1]["p50_ms"]
    print(
        f"conv batch-1 call (batching off, c=1) p50: {results['batch1_call_p50_ms']:.2f} ms "
        "(target >= 5 ms)"
    )
    print(
        f"batching on/off requests/s at concurrency 16: {results['ratio_c16_on_over_off']:.2f}x "
        f"(target >= 1.5)"
    )
    print(
        f"batching on/off requests/s at concurrency 1:  {results['ratio_c1_on_over_off']:.2f}x "
        f"(target >= 0.90)"
    )
    return results


def _single_input_alias(server: ModelServerProcess) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=10)
    conn.request("GET", "/v1/models/conv/metadata")
    doc = json.loads(conn.getresponse().read())
    sig = doc["metadata"]["signature_def"]["signature_def"]["serving_default"]
    (alias,) = sig["inputs"]
    return alias


def main() -> None:
    parser = bench_arguments(__doc__, "model_server")
    parser.add_argument("--only", choices=("protocols", "batching"))
    args = parser.parse_args()
    report = new_report()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.only in (None, "protocols"):
            report["half_plus_three"] = bench_protocols(root, args.seconds)
        if args.only in (None, "batching"):
            report["conv_batching"] = bench_batching(root, args.seconds)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
