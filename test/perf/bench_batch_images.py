"""Batch Transform images/s on the random-weight ResNet-50, against the model's own forward pass.

One run on this machine measures, on the same N images (scripts/classic_image_jobs.py builds
them from scikit-image's photos):
  (a) jpeg           JPEG files, one image per request, examples/jpeg_images/code/inference.py,
                     container defaults (no batching)
  (b) jpeg_batching  the same with SAGEMAKER_TFS_ENABLE_BATCHING=true, MAX_BATCH_SIZE and
                     BATCH_TIMEOUT_MICROS, and enough concurrent requests to fill a batch
  (c) tfrecord       TFRecord files of tf.Example, SplitType TFRecord, MultiRecord (records packed
                     up to --payload-mb), examples/tfrecord_examples/code/inference.py, batching on
  (d) forward        the model's forward pass on decoded [n, 224, 224, 3] tensors in this process
                     (the SavedModel's weights in Keras's ResNet-50, checked equal to its serving
                     signature), at the best of several batch sizes
(a)-(c) are `tfs-batch-transform` jobs (the runner library) against a container on loopback,
each after a warm-up job, timed by the runner; each records the CPU seconds of every process
(model server, Python service, nginx, runner) per image, and the load average. For reference it
also times the serving signature itself (in-graph JPEG decode + forward pass) at the best batch
size, and the decode alone. Prints images/s and (c)/(d); writes JSON and a PNG bar chart.

    .venv/bin/python test/perf/bench_batch_images.py [--images 192] [--seconds 8]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadgen import bench_arguments, new_report, write_report
from stack_cpu import cpu_by_part

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODEL = "resnet50"
SIZE = 224
CAFFE_BGR_MEANS = (103.939, 116.779, 123.68)  # example_models.image_classifier's preprocessing
FORWARD_BATCH_SIZES = (1, 8, 16, 32, 64)
Result = dict[str, Any]


def _load_jobs_script():
    """scripts/classic_image_jobs.py as a module (data set, jobs, output checks)."""
    path = REPO / "scripts" / "classic_image_jobs.py"
    spec = importlib.util.spec_from_file_location("classic_image_jobs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cij = _load_jobs_script()


# ----- CPU accounting ---------------------------------------------------------------------


def cpu_by_group(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of the container's processes by group, and ours."""
    import psutil

    totals = cpu_by_part(root_pid)
    own = psutil.Process().cpu_times()
    totals["runner"] = own.user + own.system
    return totals


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all processes, ours and others')."""
    import psutil

    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


class Interference:
    """Measures, over a block, the CPU cores busy in processes other than `own()` counts."""

    def __init__(self, own: Callable[[], float]):
        self.own = own

    def __enter__(self) -> Interference:
        self.started, self.busy, self.mine = time.perf_counter(), machine_busy(), self.own()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.started
        others = (machine_busy() - self.busy) - (self.own() - self.mine)
        self.other_cores = round(max(0.0, others) / wall, 2) if wall > 0 else 0.0


def own_cpu() -> float:
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def cpu_delta(before: dict[str, float], after: dict[str, float], images: int) -> dict[str, Any]:
    """CPU ms per image by group (a process that restarted in between is not counted)."""
    return {
        group: round(1000 * max(0.0, after[group] - before.get(group, 0.0)) / images, 2)
        for group in sorted(after)
        if group != "gone"
    }


# ----- (a)-(c): jobs through the container ------------------------------------------------


def timed_job(job: Any, container: Any, out: Path, images: int) -> Result:
    """Run `job` against `container`; images/s, CPU per image, load, and the output check."""
    load_before = os.getloadavg()[0]
    before = cpu_by_group(container.proc.pid)
    with Interference(lambda: sum(cpu_by_group(container.proc.pid).values())) as others:
        summary = cij.run_job(job.config(container.url, out))
    after = cpu_by_group(container.proc.pid)
    if not summary.ok or summary.records != images:
        raise SystemExit(f"{job.kind} job failed: {summary.to_dict()}")
    cpu = cpu_delta(before, after, images)
    return {
        "images_per_second": round(images / summary.seconds, 2),
        "other_processes_cores": others.other_cores,
        "cpu_ms_per_image_total": round(sum(cpu.values()), 2),
        "seconds": summary.seconds,
        "requests": summary.requests,
        "parameters": summary.parameters,
        "cpu_ms_per_image": cpu,
        "wall_ms_per_image": round(1000 * summary.seconds / images, 2),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def measure_side(
    label: str, job: Any, warmup: Any, env: dict[str, str], work: Path, data: Any, repeats: int
) -> tuple[Result, list[dict]]:
    """Start a container with `env`, run the warm-up job, then the timed job `repeats` times:
    the fastest run (others' load only slows a run down), all runs, and its predictions."""
    container_env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL, **env}
    runs = []
    with cij.LocalContainer(job.model_dir, container_env, 300) as container:
        cij.run_job(warmup.config(container.url, work / f"warmup-{label}"))
        for i in range(repeats):
            runs.append(timed_job(job, container, work / f"out-{label}-{i}", len(data.names)))
            _print_run(label, runs[-1])
    best = max(range(repeats), key=lambda i: runs[i]["images_per_second"])
    predictions, problems = cij.read_outputs(job.kind, work / f"out-{label}-{best}", data)
    if problems:
        raise SystemExit(f"{label}: {problems[:5]}")
    result = {**runs[best], "env": env, "runs": runs}
    return result, predictions


def _print_run(label: str, run: Result) -> None:
    print(
        f"{label:>14}: {run['images_per_second']:6.2f} images/s  ({run['requests']} requests; "
        f"other processes {run['other_processes_cores']} cores, load {run['load_before']}; "
        f"CPU ms/image {run['cpu_ms_per_image']})",
        flush=True,
    )


# ----- (d): the forward pass in this process ----------------------------------------------


def keras_resnet50(saved_model_dir: Path) -> tuple[Any, Any]:
    """(forward, serving signature): Keras's ResNet-50 holding the SavedModel's weights, as a
    tf.function on decoded images [n, 224, 224, 3] (RGB 0..255) with the model's preprocessing."""
    import keras
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model_dir))
    weights = {v.name.removesuffix(":0"): v for v in loaded.captured_variables}
    model = keras.applications.ResNet50(weights=None, classes=1000, input_shape=(SIZE, SIZE, 3))
    if sorted(w.path for w in model.weights) != sorted(weights):
        raise SystemExit("the SavedModel's variables are not Keras ResNet-50's")
    for weight in model.weights:
        weight.assign(weights[weight.path])
    means = np.asarray(CAFFE_BGR_MEANS, np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, SIZE, SIZE, 3], tf.float32)])
    def forward(images: tf.Tensor) -> tf.Tensor:
        return model(images[..., ::-1] - means, training=False)

    return forward, loaded.signatures["serving_default"]


def decode(jpegs: list[bytes]) -> Any:
    """The serving graph's decode: JPEG -> RGB -> bilinear resize to 224x224, float32."""
    import tensorflow as tf

    def one(data: bytes) -> tf.Tensor:
        return tf.image.resize(tf.io.decode_jpeg(data, channels=3), [SIZE, SIZE])

    return tf.stack([one(j) for j in jpegs])


@dataclass
class Rate:
    """Items/s of a step, this process's CPU ms per item, and others' busy cores meanwhile."""

    per_second: float
    cpu_ms: float
    other_cores: float


def rate(step: Callable[[], Any], per_step: int, seconds: float) -> Rate:
    """`step` timed after one warm-up call, over at least `seconds` and 2 calls."""
    step()
    calls, cpu, started = 0, own_cpu(), time.perf_counter()
    with Interference(own_cpu) as others:
        while calls < 2 or time.perf_counter() - started < seconds:
            step()
            calls += 1
    items = per_step * calls
    elapsed = time.perf_counter() - started
    return Rate(
        round(items / elapsed, 2), round(1000 * (own_cpu() - cpu) / items, 2), others.other_cores
    )


def measure_forward(data: Any, seconds: float, repeats: int, also: int) -> Result:
    """(d) at each batch size (rounds over the sizes, `repeats` times; the fastest round of
    each counts; batch size `also` too), the best size, and the signature with decode and the
    decode alone at that size."""
    import numpy as np
    import tensorflow as tf

    base = cij.cached_model(MODEL)
    forward, serving = keras_resnet50(base / "1")
    jpegs = [data.jpeg_bytes(i) for i in range(len(data.names))]
    images = decode(jpegs)
    check = serving(image_bytes=tf.constant(jpegs[:4]))["probabilities"].numpy()
    diff = float(np.abs(forward(images[:4]).numpy() - check).max())
    if diff > 1e-4:
        raise SystemExit(f"the Keras forward pass differs from the signature by {diff}")
    load_before = os.getloadavg()[0]
    sizes = sorted({*FORWARD_BATCH_SIZES, also})
    runs: dict[str, list[Rate]] = {str(size): [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            batch = tf.constant(np.resize(images.numpy(), (size, SIZE, SIZE, 3)))
            point = rate(lambda b=batch: forward(b).numpy(), size, seconds)
            runs[str(size)].append(point)
            print(f"  forward pass, batch {size:>3}: {point}", flush=True)
    fastest = {size: max(points, key=lambda r: r.per_second) for size, points in runs.items()}
    best = max(fastest, key=lambda size: fastest[size].per_second)
    n = int(best)
    batch_jpegs = tf.constant([jpegs[i % len(jpegs)] for i in range(n)])
    with_decode = rate(lambda: serving(image_bytes=batch_jpegs)["classes"].numpy(), n, seconds)
    decode_only = rate(lambda: decode([jpegs[i % len(jpegs)] for i in range(n)]), n, 2)
    return {
        "images_per_second": fastest[best].per_second,
        "cpu_ms_per_image_total": fastest[best].cpu_ms,
        "other_processes_cores": fastest[best].other_cores,
        "best_batch_size": n,
        "by_batch_size": {size: asdict(point) for size, point in fastest.items()},
        "all_runs": {size: [asdict(r) for r in points] for size, points in runs.items()},
        "max_abs_diff_vs_signature": diff,
        "signature_with_decode": asdict(with_decode),
        "decode_only": asdict(decode_only),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


# ----- the run ------------------------------------------------------------------------------


def largest_request(data: Any, payload_mb: int) -> int:
    """The most records the runner packs into one MultiRecord request of the TFRecord files."""
    from tfs_batch_transform.framing import split_records
    from tfs_batch_transform.packing import pack, payload_limit_bytes

    largest = 0
    for name, _ in data.files:
        records = split_records((data.tfrecord_dir / name).read_bytes(), "TFRecord")
        sizes = [len(r.framed) for r in records]
        batches = pack(sizes, "MultiRecord", payload_limit_bytes(payload_mb))
        largest = max(largest, *(b.count for b in batches))
    return largest


def side_envs(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Container settings of (a)-(c). A MultiRecord request is one model server task larger
    than max_batch_size: in Batch Transform (the runner sets SAGEMAKER_BATCH) the container
    splits it into batches of that size."""

    def batching(size: int) -> dict[str, str]:
        return {
            "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
            "SAGEMAKER_TFS_MAX_BATCH_SIZE": str(size),
            "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": str(args.batch_timeout_micros),
        }

    return {
        "jpeg": {},
        "jpeg_batching": {
            **batching(args.max_batch_size),
            "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": str(args.concurrency),
        },
        "tfrecord": {
            **batching(args.max_batch_size),
            "SAGEMAKER_MAX_PAYLOAD_IN_MB": str(args.payload_mb),
        },
    }


def run(args: argparse.Namespace, work: Path) -> Result:
    data = cij.build_dataset(work / "data", args.images, records_per_file=1000, seed=args.seed)
    warm = cij.build_dataset(work / "warm", args.warmup_images, 1000, seed=args.seed + 1)
    jobs = {j.kind: j for j in cij.make_jobs(data, MODEL, work / "models")}
    warmups = {j.kind: j for j in cij.make_jobs(warm, MODEL, work / "warm-models")}
    report: Result = {
        **new_report(),
        "images": args.images,
        "model": MODEL,
        "unit": "images/s",
        "sides": {},
    }
    largest = largest_request(data, args.payload_mb)
    report["tfrecord_largest_request_records"] = largest
    envs = side_envs(args)
    predictions = {}
    for label, kind in (("jpeg", "jpeg"), ("jpeg_batching", "jpeg"), ("tfrecord", "tfrecord")):
        report["sides"][label], predictions[label] = measure_side(
            label, jobs[kind], warmups[kind], envs[label], work, data, args.repeats
        )
    problems = cij.disagreements(predictions["jpeg"], predictions["tfrecord"], data.names, "a/c")
    problems += cij.disagreements(predictions["jpeg"], predictions["jpeg_batching"], data.names,
                                  "a/b")  # fmt: skip
    report["prediction_problems"] = problems
    report["sides"]["forward"] = measure_forward(data, args.seconds, args.repeats, largest)
    sides = report["sides"]
    report["ratio_c_over_d"] = round(
        sides["tfrecord"]["images_per_second"] / sides["forward"]["images_per_second"], 3
    )
    # The same ratio from CPU time per image (all processes of the job vs the forward pass):
    # what (c)/(d) would be on a CPU-bound machine nobody else uses.
    report["cpu_ratio_c_over_d"] = round(
        sides["forward"]["cpu_ms_per_image_total"] / sides["tfrecord"]["cpu_ms_per_image_total"], 3
    )
    return report


SIDE_LABELS = {
    "jpeg": "(a) JPEG,\none per request",
    "jpeg_batching": "(b) JPEG,\nbatching",
    "tfrecord": "(c) TFRecord\nMultiRecord",
    "forward": "(d) forward pass\nin process",
}


def draw_chart(report: Result, path: Path) -> None:
    """A bar chart of the four images/s figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = [report["sides"][side]["images_per_second"] for side in SIDE_LABELS]
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(list(SIDE_LABELS.values()), values, color=["#999", "#6a9", "#369", "#c63"])
    ax.bar_label(bars, fmt="%.2f")
    ax.set_ylabel("images/s")
    ax.set_title(
        f"ResNet-50 (random weights), {report['images']} images, {report['host_cpus']} CPUs: "
        f"(c)/(d) = {report['ratio_c_over_d']:.2f}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = bench_arguments(__doc__, "batch_images", seconds=None)
    parser.add_argument("--images", type=int, default=192, help="images per job (default 192)")
    parser.add_argument("--warmup-images", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0, help="per forward-pass point")
    parser.add_argument(
        "--max-batch-size", type=int, default=16, help="(b) and (c): the execution batch size"
    )
    parser.add_argument("--batch-timeout-micros", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=16, help="(b) concurrent requests")
    parser.add_argument("--payload-mb", type=int, default=1, help="(c) MaxPayloadInMB")
    parser.add_argument("--repeats", type=int, default=2, help="runs per point; fastest counts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-batch-images-") as tmp:
        report = run(args, Path(tmp))
    chart = write_report(report, args.out).with_suffix(".png")
    draw_chart(report, chart)
    sides = report["sides"]
    print(
        "images/s: "
        + ", ".join(f"{side} {sides[side]['images_per_second']:.2f}" for side in SIDE_LABELS)
    )
    print(
        f"(c)/(d) = {report['ratio_c_over_d']:.3f}  (best forward batch size "
        f"{sides['forward']['best_batch_size']}; signature with in-graph decode "
        f"{sides['forward']['signature_with_decode']['per_second']:.2f} images/s); "
        f"by CPU time per image {report['cpu_ratio_c_over_d']:.3f}"
    )
    for problem in report["prediction_problems"]:
        print(f"PROBLEM: {problem}")
    print(f"wrote {chart}")
    return 1 if report["prediction_problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
