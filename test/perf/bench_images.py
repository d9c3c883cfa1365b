"""JPEG images/s through the classic inference.py, the built-in x-image format, and direct.

For each image model (digits CNN, random-weight ResNet-50; both take b64 JPEG `image_bytes`
and decode in the graph), one run on this machine measures, at concurrency 1 and 16:
  (a) inference.py: POST /invocations, application/x-image, through
      examples/jpeg_images/code/inference.py (the classic script, unchanged)
  (b) built-in:     POST /invocations, application/x-image, no user code
  (c) direct:       POST the model server's :predict with {"instances": [{"b64": ...}]}
Every side sends the same rotating set of JPEGs (the digits test set, or scikit-image's
sample photos), and one image is checked to get the same class on all three sides first.
Prints images/s and the ratios (a)/(c) and (b)/(c); writes JSON.

    .venv/bin/python test/perf/bench_images.py [--models digits resnet50] [--seconds 5]
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # test/, for conftest
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # example_models
from _local_endpoint import assemble_model_dir, cached_model  # noqa: E402
from bench_container import WARMUP_REQUESTS, Failures, rest_worker  # noqa: E402
from loadgen import bench_arguments, new_report, run_load, write_report  # noqa: E402

from conftest import serve_stack  # noqa: E402

CODE_DIR = REPO / "examples" / "jpeg_images" / "code"
CONCURRENCIES = (1, 16)
SIDES = ("inference_py", "built_in", "direct")


def _jpeg_example():
    """examples/jpeg_images/run.py as a module (its write_images lays out the test images)."""
    spec = importlib.util.spec_from_file_location("jpeg_images_run", CODE_DIR.parent / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _classes(url: str, body: bytes, content_type: str) -> int:
    reply = requests.post(url, data=body, headers={"Content-Type": content_type}, timeout=300)
    if reply.status_code != 200:
        raise SystemExit(f"preflight {url} -> {reply.status_code} {reply.text[:500]}")
    (prediction,) = reply.json()["predictions"]
    return int(prediction["classes"])


def _b64_body(jpeg: bytes) -> bytes:
    return json.dumps({"instances": [{"b64": base64.b64encode(jpeg).decode()}]}).encode()


def _measure(port: int, path: str, bodies: list[bytes], content_type: str, c: int, s: float):
    failures = Failures()
    worker = rest_worker(port, path, bodies, failures, content_type)
    point = run_load(worker, c, s, WARMUP_REQUESTS).as_dict()
    if failures.count:
        raise SystemExit(f"{failures.count} requests failed: {failures.samples}")
    return point


def bench_model(model: str, jpegs: list[bytes], work: Path, seconds: float) -> dict:
    base = cached_model(model)
    with_code = assemble_model_dir(work / "with-code", model, base, CODE_DIR)
    without_code = work / "no-code"
    assemble_model_dir(without_code, model, base, CODE_DIR)
    for path in (without_code / "code").iterdir():
        path.unlink()
    (without_code / "code").rmdir()
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": model}
    direct_bodies = [_b64_body(j) for j in jpegs]
    image = "application/x-image"
    results: dict = {str(c): {} for c in CONCURRENCIES}
    for label, model_dir in (("with-code", with_code), ("no-code", without_code)):
        run_tmp = work / f"run-{label}"
        run_tmp.mkdir()
        with serve_stack(model_dir, run_tmp, env, instances=1) as server:
            front = (server.port, "/invocations")
            direct = (server.rest_ports[0], f"/v1/models/{model}:predict")
            front_url = f"http://127.0.0.1:{server.port}/invocations"
            direct_url = f"http://127.0.0.1:{direct[0]}{direct[1]}"
            expected = _classes(direct_url, direct_bodies[0], "application/json")
            got = _classes(front_url, jpegs[0], image)
            if got != expected:
                raise SystemExit(f"{label}: class {got} via /invocations, {expected} direct")
            for c in CONCURRENCIES:
                point = results[str(c)]
                if label == "with-code":
                    json_type = "application/json"
                    point["direct"] = _measure(*direct, direct_bodies, json_type, c, seconds)
                    point["inference_py"] = _measure(*front, jpegs, image, c, seconds)
                else:
                    point["built_in"] = _measure(*front, jpegs, image, c, seconds)
    for c, point in results.items():
        direct_rps = point["direct"]["rps"]
        for side in ("inference_py", "built_in"):
            point[f"ratio_{side}_over_direct"] = round(point[side]["rps"] / direct_rps, 3)
        cells = " | ".join(f"{side} {point[side]['rps']:7.1f}/s" for side in SIDES)
        print(
            f"{model:>9} c={c:>2}: {cells} | inference.py/direct "
            f"{point['ratio_inference_py_over_direct']:.2f}, built-in/direct "
            f"{point['ratio_built_in_over_direct']:.2f}",
            flush=True,
        )
    return results


def main() -> None:
    parser = bench_arguments(__doc__, "images")
    parser.add_argument("--models", nargs="+", default=["digits", "resnet50"])
    args = parser.parse_args()
    example = _jpeg_example()
    report = new_report(
        seconds_per_point=args.seconds, unit="images/s (one JPEG per request)", models={}
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for model in args.models:
            images = example.write_images(model, tmp / model / "images")
            jpegs = [path.read_bytes() for path, _ in images]
            work = tmp / model / "bench"
            work.mkdir()
            report["models"][model] = bench_model(model, jpegs, work, args.seconds)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
