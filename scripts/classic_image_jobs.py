"""The classic Batch Transform image jobs at any size, run through the container and checked.

    .venv/bin/python scripts/classic_image_jobs.py --n 2000 [--model digits|resnet50]
        [--records-per-file 1000] [--output DIR] [--kill-and-resume]

Builds N JPEG images from scikit-image's bundled photos (random crops, random sizes, seeded),
as a directory of .jpg files (names sort in image order) and as TFRecord files of
--records-per-file tf.Example records (`image/encoded`, `image/format`, `image/filename`).
Then it runs both jobs through the container (`serve`, one per job) with the runner:

  JPEG      --content-type application/x-image, SplitType None: one image per file and request,
            through examples/jpeg_images/code/inference.py (the classic script)
  TFRecord  --split-type TFRecord --batch-strategy MultiRecord --content-type
            application/x-tfexample --accept application/jsonlines --assemble-with Line,
            through examples/tfrecord_examples/code/inference.py (one line per record)

and checks: exactly one prediction per image (one .out per JPEG, one line per record), nothing
else in the output directories, both jobs agree image by image (so the TFRecord lines are in
input order), and a sample agrees with the SavedModel run in this process. With
--kill-and-resume each job is also started as a `tfs-batch-transform` subprocess, SIGKILLed
mid-job, rerun with --resume, and its outputs must equal the uninterrupted run's. Exit 0 when
every check passes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "test" / "support"))  # example_models
from _local_endpoint import assemble_model_dir, cached_model  # noqa: E402

from sagemaker_serving.formats.tfrecord import frame_tfrecord  # noqa: E402
from tfs_batch_transform import JobConfig, run_job  # noqa: E402
from tfs_batch_transform.container import LocalContainer  # noqa: E402

JPEG_CODE = REPO / "examples" / "jpeg_images" / "code"
TFRECORD_CODE = REPO / "examples" / "tfrecord_examples" / "code"
MODELS = ("digits", "resnet50")
# scikit-image's bundled photos (no download); grey ones are converted to RGB.
PHOTOS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "camera",
    "coins",
    "moon",
    "grass",
    "brick",
)
MIN_SIDE, MAX_SIDE = 160, 320  # output image sides, pixels
JPEG_QUALITY = 90
TOLERANCE = 1e-4  # probabilities of the same image through two jobs
JobResult = dict[str, Any]


# ----- the data set -----------------------------------------------------------------------


@dataclass
class Dataset:
    """N images as JPEG files and as TFRecord files; `files` is (name, records) per TFRecord."""

    jpeg_dir: Path
    tfrecord_dir: Path
    names: list[str]
    files: list[tuple[str, int]]

    def jpeg_bytes(self, index: int) -> bytes:
        return (self.jpeg_dir / self.names[index]).read_bytes()


def load_photos() -> list[np.ndarray]:
    """The bundled photos as RGB uint8 arrays."""
    from skimage import data

    photos = []
    for name in PHOTOS:
        image = np.asarray(getattr(data, name)())
        if image.ndim == 2:
            image = np.repeat(image[..., None], 3, axis=2)
        photos.append(image[..., :3].astype(np.uint8))
    return photos


def random_jpeg(photo: np.ndarray, rng: np.random.Generator) -> bytes:
    """A random crop (30-100 % of each side) of `photo`, resized to random sides, as JPEG."""
    from PIL import Image

    height, width = photo.shape[:2]
    crop_h = int(rng.integers(max(8, int(0.3 * height)), height + 1))
    crop_w = int(rng.integers(max(8, int(0.3 * width)), width + 1))
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    size = tuple(int(s) for s in rng.integers(MIN_SIDE, MAX_SIDE + 1, size=2))
    crop = Image.fromarray(photo[top : top + crop_h, left : left + crop_w])
    out = io.BytesIO()
    crop.resize(size, Image.Resampling.BILINEAR).save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def random_jpegs(n: int, seed: int = 0) -> Iterator[bytes]:
    """`n` JPEG images, the same for the same seed."""
    photos = load_photos()
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield random_jpeg(photos[int(rng.integers(len(photos)))], rng)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def tf_example(features: dict[str, bytes]) -> bytes:
    """A serialized tf.train.Example of bytes features (protobuf wire format, keys sorted)."""
    entries = b"".join(
        _field(1, _field(1, key.encode()) + _field(2, _field(1, _field(1, value))))
        for key, value in sorted(features.items())
    )
    return _field(1, entries)


def image_example(jpeg: bytes, filename: str) -> bytes:
    return tf_example(
        {"image/encoded": jpeg, "image/format": b"jpeg", "image/filename": filename.encode()}
    )


def build_dataset(dest: Path, n: int, records_per_file: int = 1000, seed: int = 0) -> Dataset:
    """Write `dest`/jpeg/img-000000.jpg ... and `dest`/tfrecord/part-00000.tfrecord ..."""
    if n < 1 or records_per_file < 1:
        raise ValueError("n and records_per_file must be positive")
    jpeg_dir, tfrecord_dir = dest / "jpeg", dest / "tfrecord"
    for directory in (jpeg_dir, tfrecord_dir):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    width = max(6, len(str(n - 1)))
    names = [f"img-{i:0{width}d}.jpg" for i in range(n)]
    files: list[tuple[str, int]] = []
    frames: list[bytes] = []

    def flush() -> None:
        name = f"part-{len(files):05d}.tfrecord"
        (tfrecord_dir / name).write_bytes(b"".join(frames))
        files.append((name, len(frames)))
        frames.clear()

    for name, jpeg in zip(names, random_jpegs(n, seed), strict=True):
        (jpeg_dir / name).write_bytes(jpeg)
        frames.append(frame_tfrecord(image_example(jpeg, name)))
        if len(frames) == records_per_file:
            flush()
    if frames:
        flush()
    return Dataset(jpeg_dir, tfrecord_dir, names, files)


# ----- the jobs ---------------------------------------------------------------------------


@dataclass
class Job:
    """One of the two classic jobs: its model directory, input and runner settings."""

    kind: str  # "jpeg" or "tfrecord"
    model_dir: Path
    input: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def config(self, url: str, output: Path, **extra: Any) -> JobConfig:
        return JobConfig(
            input=str(self.input), output=str(output), endpoints=[url], **self.settings, **extra
        )

    def cli_args(self, url: str, output: Path) -> list[str]:
        """The same job as `tfs-batch-transform` flags."""
        args = ["--endpoint", url, "--input", str(self.input), "--output", str(output)]
        for key, value in self.settings.items():
            if value is not None:
                args += [f"--{key.replace('_', '-')}", str(value)]
        return args


def make_jobs(
    dataset: Dataset,
    model: str,
    work: Path,
    max_concurrent: int | None = None,
    max_payload_mb: int | None = None,
    model_base: Path | None = None,
) -> list[Job]:
    """The JPEG and TFRecord jobs, each with its own model directory (classic inference.py).
    `model_base` (a SavedModel base path) replaces the examples' cached `model`."""
    base = model_base or cached_model(model)
    common = {"max_concurrent_transforms": max_concurrent, "max_payload_in_mb": max_payload_mb}
    jobs = {  # kind: (inference.py's folder, input, runner settings)
        "jpeg": (
            JPEG_CODE,
            dataset.jpeg_dir,
            {
                "content_type": "application/x-image",
                "accept": "application/json",
                "split_type": "None",
            },
        ),
        "tfrecord": (
            TFRECORD_CODE,
            dataset.tfrecord_dir,
            {
                "content_type": "application/x-tfexample",
                "accept": "application/jsonlines",
                "split_type": "TFRecord",
                "batch_strategy": "MultiRecord",
                "assemble_with": "Line",
            },
        ),
    }
    return [
        Job(
            kind,
            assemble_model_dir(work / f"model-{kind}", model, base, code),
            inputs,
            {**settings, **common},
        )
        for kind, (code, inputs, settings) in jobs.items()
    ]


# ----- reading and checking outputs -------------------------------------------------------


def jpeg_predictions(out_dir: Path, dataset: Dataset) -> tuple[list[dict], list[str]]:
    """One prediction per image from `<name>.out`; problems found."""
    predictions, problems = [], []
    for name in dataset.names:
        path = out_dir / f"{name}.out"
        if not path.is_file():
            problems.append(f"{name}: no output")
            predictions.append({})
            continue
        found = json.loads(path.read_bytes())["predictions"]
        if len(found) != 1:
            problems.append(f"{name}: {len(found)} predictions")
        predictions.append(found[0] if found else {})
    return predictions, problems


def tfrecord_predictions(out_dir: Path, dataset: Dataset) -> tuple[list[dict], list[str]]:
    """One prediction per record from `<file>.out` (one JSON line per record); problems."""
    predictions, problems = [], []
    for name, count in dataset.files:
        path = out_dir / f"{name}.out"
        text = path.read_text() if path.is_file() else None
        lines = text.split("\n") if text else []
        if text is None:
            problems.append(f"{name}: no output")
        elif lines[-1] != "" or "" in lines[:-1] or len(lines) - 1 != count:
            problems.append(f"{name}: {len(lines) - 1} lines (or empty ones) for {count} records")
        parsed = [json.loads(line) for line in lines[:-1] if line]
        predictions += (parsed + [{}] * count)[:count]
    return predictions, problems


def stray_files(out_dir: Path, expected: Sequence[str]) -> list[str]:
    """Files in `out_dir` other than `<expected>.out` (temporary files included)."""
    wanted = {f"{name}.out" for name in expected}
    return sorted(p.name for p in out_dir.iterdir() if p.name not in wanted)


def agree(a: dict, b: dict, tolerance: float = TOLERANCE) -> bool:
    """Same class and probabilities within `tolerance` (a class may differ only on a tie)."""
    if not a or not b:
        return False
    pa, pb = np.asarray(a["probabilities"]), np.asarray(b["probabilities"])
    if pa.shape != pb.shape or np.abs(pa - pb).max() > tolerance:
        return False
    ca, cb = int(a["classes"]), int(b["classes"])
    return ca == cb or abs(pa[ca] - pa[cb]) <= tolerance


def disagreements(a: list[dict], b: list[dict], names: Sequence[str], label: str) -> list[str]:
    """`label: name` for each image whose predictions differ (at most 10 listed)."""
    bad = [names[i] for i in range(len(names)) if i >= len(b) or not agree(a[i], b[i])]
    more = f" (+{len(bad) - 10} more)" if len(bad) > 10 else ""
    return [f"{label}: {len(bad)} images differ: {', '.join(bad[:10])}{more}"] if bad else []


def reference_predictions(base: Path, dataset: Dataset, indexes: Sequence[int]) -> list[dict]:
    """The SavedModel's own predictions (latest version under `base`) for some images, run in
    this process."""
    import tensorflow as tf

    version = max((p for p in base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    serve = tf.saved_model.load(str(version)).signatures["serving_default"]
    found = []
    for start in range(0, len(indexes), 32):
        chunk = [dataset.jpeg_bytes(i) for i in indexes[start : start + 32]]
        out = serve(image_bytes=tf.constant(chunk))
        for probs, cls in zip(out["probabilities"].numpy(), out["classes"].numpy(), strict=True):
            found.append({"probabilities": probs.tolist(), "classes": int(cls)})
    return found


def read_outputs(kind: str, out_dir: Path, dataset: Dataset) -> tuple[list[dict], list[str]]:
    """Predictions in image order and problems (missing, extra or stray outputs)."""
    if kind == "jpeg":
        predictions, problems = jpeg_predictions(out_dir, dataset)
        inputs = dataset.names
    else:
        predictions, problems = tfrecord_predictions(out_dir, dataset)
        inputs = [name for name, _ in dataset.files]
    strays = stray_files(out_dir, inputs)
    return predictions, problems + [f"unexpected file {name}" for name in strays]


# ----- running, killing and resuming ------------------------------------------------------


def run_uninterrupted(job: Job, url: str, out_dir: Path) -> JobResult:
    """Run `job` with the runner library; its summary (and wall time)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    started = time.monotonic()
    summary = run_job(job.config(url, out_dir))
    result = summary.to_dict()
    result["wall_seconds"] = round(time.monotonic() - started, 3)
    return result


def runner_command() -> list[str]:
    """`tfs-batch-transform` beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "tfs-batch-transform"
    found = str(beside) if beside.exists() else shutil.which("tfs-batch-transform")
    if not found:
        raise SystemExit("tfs-batch-transform is not installed beside this Python or on PATH")
    return [found]


def _outputs(out_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out_dir.glob("*.out")}


def kill_mid_job(cmd: list[str], out_dir: Path, total: int, fraction: float, timeout: float):
    """Start `cmd`, SIGKILL it once `fraction` of `total` outputs exist; outputs at the kill."""
    target = max(1, int(total * fraction))
    with open(out_dir.parent / f"{out_dir.name}-killed.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if out_dir.is_dir() and len(list(out_dir.glob("*.out"))) >= target:
                break
            time.sleep(0.005)
        if proc.poll() is not None:
            raise RuntimeError(f"the job ended (exit {proc.returncode}) before the kill")
        if time.monotonic() >= deadline:
            raise RuntimeError(f"fewer than {target} outputs after {timeout:.0f} s")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return _outputs(out_dir)


def kill_and_resume(
    job: Job, url: str, out_dir: Path, total: int, fraction: float, timeout: float
) -> JobResult:
    """SIGKILL the CLI mid-job, rerun it with --resume; what each phase left and did."""
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    cmd = runner_command() + job.cli_args(url, out_dir) + ["--progress", "log"]
    at_kill = kill_mid_job(cmd, out_dir, total, fraction, timeout)
    leftovers = stray_files(out_dir, [n.removesuffix(".out") for n in at_kill])
    summary_path = out_dir.parent / f"{out_dir.name}-resume-summary.json"
    started = time.monotonic()
    with open(out_dir.parent / f"{out_dir.name}-resume.log", "wb") as log:
        code = subprocess.run(
            [*cmd, "--resume", "--summary-json", str(summary_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        ).returncode
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    after = _outputs(out_dir)
    problems = [] if code == 0 else [f"--resume run exited {code}"]
    changed = [name for name, data in at_kill.items() if after.get(name) != data]
    if changed:
        problems.append(f"outputs complete at the kill were rewritten: {changed[:5]}")
    if summary.get("skipped") != len(at_kill):
        problems.append(f"--resume skipped {summary.get('skipped')}, not {len(at_kill)}")
    return {
        "outputs_at_kill": len(at_kill),
        "leftovers_at_kill": leftovers,
        "resume_exit": code,
        "resume_skipped": summary.get("skipped"),
        "resume_succeeded": summary.get("succeeded"),
        "resume_seconds": round(time.monotonic() - started, 3),
        "problems": problems,
    }


def byte_identical(a: Path, b: Path) -> tuple[int, int]:
    """(outputs with identical bytes, outputs in `a`)."""
    first, second = _outputs(a), _outputs(b)
    return sum(second.get(name) == data for name, data in first.items()), len(first)


# ----- the whole run ----------------------------------------------------------------------


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Build the data, run both jobs (and the kill/resume check); a report with `problems`."""
    work = Path(args.output).resolve()
    started = time.monotonic()
    dataset = build_dataset(work / "data", args.n, args.records_per_file, args.seed)
    report: dict[str, Any] = {
        "n": args.n,
        "model": args.model,
        "records_per_file": args.records_per_file,
        "tfrecord_files": len(dataset.files),
        "build_seconds": round(time.monotonic() - started, 3),
        "jobs": {},
        "problems": [],
    }
    print(
        f"built {args.n} JPEGs and {len(dataset.files)} TFRecord files in {work / 'data'} "
        f"({report['build_seconds']:.1f} s)",
        flush=True,
    )
    base = Path(args.model_base).resolve() if args.model_base else None
    jobs = make_jobs(
        dataset, args.model, work, args.max_concurrent_transforms, args.max_payload_in_mb, base
    )
    env = dict(args.env)
    predictions: dict[str, list[dict]] = {}
    for job in jobs:
        report["jobs"][job.kind], predictions[job.kind] = run_one(job, dataset, work, env, args)
        report["problems"] += report["jobs"][job.kind]["problems"]
    report["problems"] += disagreements(
        predictions["jpeg"], predictions["tfrecord"], dataset.names, "JPEG vs TFRecord"
    )
    report["problems"] += check_reference(args, dataset, predictions["jpeg"], report)
    report["total_seconds"] = round(time.monotonic() - started, 3)
    return report


def run_one(
    job: Job, dataset: Dataset, work: Path, env: dict[str, str], args: argparse.Namespace
) -> tuple[JobResult, list[dict]]:
    """One job through its own container: uninterrupted, then killed and resumed if asked."""
    out_dir = work / "out" / job.kind
    inputs = len(dataset.names) if job.kind == "jpeg" else len(dataset.files)
    with LocalContainer(
        job.model_dir, {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": args.model, **env}, args.startup_timeout
    ) as container:
        result = run_uninterrupted(job, container.url, out_dir)
        predictions, problems = read_outputs(job.kind, out_dir, dataset)
        if result["failed"]:
            problems.append(f"{result['failed']} inputs failed")
        print(
            f"{job.kind}: {result['succeeded']} outputs, {result['records']} records, "
            f"{result['requests']} requests in {result['seconds']:.1f} s "
            f"({result['records_per_second']:.1f} images/s); problems: {len(problems)}",
            flush=True,
        )
        if args.kill_and_resume:
            resumed_dir = work / "out" / f"{job.kind}-resumed"
            kill = kill_and_resume(
                job, container.url, resumed_dir, inputs, args.kill_after, args.job_timeout
            )
            resumed, resumed_problems = read_outputs(job.kind, resumed_dir, dataset)
            kill["problems"] += resumed_problems + disagreements(
                predictions, resumed, dataset.names, f"{job.kind} resumed vs uninterrupted"
            )
            kill["identical_bytes"], kill["outputs"] = byte_identical(out_dir, resumed_dir)
            result["kill_and_resume"] = kill
            problems += kill["problems"]
            print(
                f"{job.kind} killed with {kill['outputs_at_kill']}/{inputs} outputs "
                f"(leftovers {kill['leftovers_at_kill']}), resumed: skipped "
                f"{kill['resume_skipped']}, sent {kill['resume_succeeded']}; "
                f"{kill['identical_bytes']}/{kill['outputs']} outputs byte-identical to the "
                f"uninterrupted run; problems: {len(kill['problems'])}",
                flush=True,
            )
    result["problems"] = problems
    return result, predictions


def check_reference(
    args: argparse.Namespace, dataset: Dataset, jpeg: list[dict], report: dict[str, Any]
) -> list[str]:
    """Compare `args.reference` evenly spaced images with the model run in this process."""
    count = min(args.reference, args.n)
    if count <= 0:
        return []
    indexes = sorted({round(i * (args.n - 1) / max(1, count - 1)) for i in range(count)})
    base = Path(args.model_base) if args.model_base else cached_model(args.model)
    expected = reference_predictions(base, dataset, indexes)
    names = [dataset.names[i] for i in indexes]
    problems = disagreements(expected, [jpeg[i] for i in indexes], names, "in-process vs job")
    report["reference_images"] = len(indexes)
    return problems


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def key_value(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
        return key, value

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="images (default 2000)")
    parser.add_argument("--model", choices=MODELS, default="digits")
    parser.add_argument(
        "--output",
        default=str(REPO / "run" / "classic_image_jobs"),
        help="work directory: data/, model dirs, out/, report.json",
    )
    parser.add_argument(
        "--model-base", help="SavedModel base path (DIR/<version>/) instead of the cached --model"
    )
    parser.add_argument("--records-per-file", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kill-and-resume",
        action="store_true",
        help="also SIGKILL each job mid-way and finish it with --resume",
    )
    parser.add_argument(
        "--kill-after",
        type=float,
        default=0.25,
        help="fraction of the outputs written before the kill (default 0.25)",
    )
    parser.add_argument(
        "--reference",
        type=int,
        default=64,
        help="images also run through the SavedModel in this process (0: none)",
    )
    parser.add_argument("--max-concurrent-transforms", type=int)
    parser.add_argument("--max-payload-in-mb", type=int)
    parser.add_argument(
        "--env",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="container environment variable",
    )
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument(
        "--job-timeout",
        type=float,
        default=1800.0,
        help="deadline of each CLI run in the kill/resume check, seconds",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run_all(args)
    path = Path(args.output) / "report.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    for problem in report["problems"]:
        print(f"PROBLEM: {problem}")
    verdict = "FAILED" if report["problems"] else "OK"
    print(
        f"{verdict}: {args.n} images ({args.model}), {report['tfrecord_files']} TFRecord files, "
        f"{report['total_seconds']:.1f} s in all; report {path}"
    )
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
