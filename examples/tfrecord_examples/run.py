"""TFRecord files of tf.Example images, one JSON line per record, end to end on this machine.

    .venv/bin/python examples/tfrecord_examples/run.py [--port 8080]

Builds the digits model (cached in run/examples/models/), lays out a SageMaker model directory
(digits/1/ + code/inference.py), writes the held-out digits as TFRecord files of tf.Example
records (image/encoded = JPEG, image/class/label), starts the container stack (`serve`) on
loopback and sends them as SageMaker Batch Transform does with SplitType=TFRecord and
Content-Type application/x-tfexample:

  MultiRecord   each file's bytes (framed records back to back) in one request
  SingleRecord  each bare record in its own request

It checks one output line per record, in order, writes the MultiRecord outputs as
<file>.out (AssembleWith=Line) and fails when a request fails or accuracy is below 95 %.
See README.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "test" / "support"))  # example_models
from _local_endpoint import CACHE, assemble_model_dir, cached_model, local_endpoint  # noqa: E402

MODEL = "digits"
FILES = 4
MIN_ACCURACY = 0.95
HEADERS = {"Content-Type": "application/x-tfexample", "Accept": "application/jsonlines"}


def write_tfrecords(dest: Path, files: int = FILES) -> list[tuple[Path, list[int]]]:
    """The digits test set as `files` TFRecord files; (path, labels in record order) each."""
    import tensorflow as tf

    from example_models import digits_test_set

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    samples = digits_test_set()
    per_file = -(-len(samples) // files)
    written = []
    for n in range(files):
        chunk = samples[n * per_file : (n + 1) * per_file]
        path = dest / f"digits-{n:05d}-of-{files:05d}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as writer:
            for jpeg, label in chunk:
                writer.write(example(jpeg, label))
        written.append((path, [label for _, label in chunk]))
    return written


def example(jpeg: bytes, label: int) -> bytes:
    """A serialized tf.train.Example as image data sets store them."""
    import tensorflow as tf

    def bytes_feature(value: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    feature = {
        "image/encoded": bytes_feature(jpeg),
        "image/format": bytes_feature(b"jpeg"),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def bare_records(path: Path) -> list[bytes]:
    """The records of a TFRecord file without their framing (what SingleRecord sends)."""
    import tensorflow as tf

    return [bytes(record.numpy()) for record in tf.data.TFRecordDataset(str(path))]


def predicted_classes(body: str) -> list[int]:
    """Classes from a JSON Lines response (one line per record)."""
    return [json.loads(line)["classes"] for line in body.split("\n") if line.strip()]


class Tally:
    """Correct/total predictions and failed requests of one run."""

    def __init__(self, name: str):
        self.name, self.correct, self.total, self.failed = name, 0, 0, 0
        self.started = time.monotonic()

    def check(self, label: str, classes: list[int], labels: list[int]) -> None:
        if len(classes) != len(labels):
            self.failed += 1
            print(f"  {label}: {len(labels)} records but {len(classes)} output lines")
            return
        right = sum(c == y for c, y in zip(classes, labels, strict=True))
        self.correct += right
        self.total += len(labels)
        print(f"  {label}: {len(labels)} records -> {len(classes)} lines, {right} correct")

    def fail(self, label: str, reply: requests.Response) -> None:
        self.failed += 1
        print(f"  {label}: FAILED {reply.status_code}: {reply.text[:300]}")

    def summary(self, requests_sent: int) -> bool:
        elapsed = time.monotonic() - self.started
        accuracy = self.correct / self.total if self.total else 0.0
        print(
            f"{self.name}: {requests_sent} requests in {elapsed:.1f} s, {self.failed} failed; "
            f"accuracy {self.correct}/{self.total} = {accuracy:.2%} "
            f"(required: {MIN_ACCURACY:.0%})"
        )
        return not self.failed and accuracy >= MIN_ACCURACY


def multi_record(url: str, files: list[tuple[Path, list[int]]], out_dir: Path) -> bool:
    """One request per file (framed records); write <file>.out with a newline per record."""
    print("MultiRecord: one request per file, framed TFRecords")
    out_dir.mkdir(parents=True, exist_ok=True)
    tally = Tally("MultiRecord")
    with requests.Session() as session:
        for path, labels in files:
            reply = session.post(
                f"{url}/invocations", data=path.read_bytes(), headers=HEADERS, timeout=300
            )
            if reply.status_code != 200:
                tally.fail(path.name, reply)
                continue
            (out_dir / f"{path.name}.out").write_text(reply.text + "\n")
            tally.check(path.name, predicted_classes(reply.text), labels)
    return tally.summary(len(files))


def single_record(url: str, files: list[tuple[Path, list[int]]]) -> bool:
    """One request per bare record."""
    print("SingleRecord: one request per record, no framing")
    tally = Tally("SingleRecord")
    sent = 0
    with requests.Session() as session:
        for path, labels in files:
            classes = []
            for i, record in enumerate(bare_records(path)):
                sent += 1
                reply = session.post(
                    f"{url}/invocations", data=record, headers=HEADERS, timeout=120
                )
                if reply.status_code != 200:
                    tally.fail(f"{path.name} record {i}", reply)
                    classes.append(-1)
                    continue
                classes.extend(predicted_classes(reply.text))
            tally.check(path.name, classes, labels)
    return tally.summary(sent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--port", type=int, default=8080, help="front door port (default 8080; 0: any free)"
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached model")
    args = parser.parse_args(argv)

    work = CACHE / "tfrecord_examples"
    files = write_tfrecords(work / "input")
    records = sum(len(labels) for _, labels in files)
    print(f"wrote {records} tf.Example records in {len(files)} files to {work / 'input'}")
    model_base = cached_model(MODEL, rebuild=args.rebuild)
    model_dir = assemble_model_dir(work / "model", MODEL, model_base, HERE / "code")
    if (work / "output").exists():
        shutil.rmtree(work / "output")
    with local_endpoint(model_dir, args.port) as url:
        multi_ok = multi_record(url, files, work / "output")
        single_ok = single_record(url, files)
    print(f"MultiRecord outputs: {work / 'output'}")
    return 0 if multi_ok and single_ok else 1


if __name__ == "__main__":
    sys.exit(main())
