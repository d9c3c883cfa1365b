"""The examples' code/inference.py handlers, called directly against a tfs-model-server serving
the digits classifier (no nginx, no Python service); the TFRecord parsing on its own; and each
example's run.py end to end through the whole stack."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import struct
import subprocess
import sys
from collections import namedtuple
from pathlib import Path
from types import ModuleType

import pytest
import requests

from conftest import REPO, model_server

tf = pytest.importorskip("tensorflow")

import example_models as em  # noqa: E402

EXAMPLES = REPO / "examples"
MIN_ACCURACY = 0.97

# The handler context of the AWS container (10 fields at HEAD).
Context = namedtuple(
    "Context",
    "model_name model_version method rest_uri grpc_port channel custom_attributes "
    "request_content_type accept_header content_length",
)


def load_handlers(example: str) -> ModuleType:
    """An example's code/inference.py, imported by file path as the Python service does."""
    path = EXAMPLES / example / "code" / "inference.py"
    spec = importlib.util.spec_from_file_location(f"{example}_inference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(digits_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("examples_direct")
    args = ["--model_name=digits", f"--model_base_path={digits_model}"]
    with model_server(args, tmp / "server.log", ready_model="digits") as srv:
        yield srv


@pytest.fixture(scope="module")
def jpeg() -> ModuleType:
    return load_handlers("jpeg_images")


@pytest.fixture(scope="module")
def tfrecord() -> ModuleType:
    return load_handlers("tfrecord_examples")


def context(server, content_type: str | None, accept: str = "application/json") -> Context:
    return Context(
        model_name=None,
        model_version=None,
        method=None,
        rest_uri=f"{server.rest}/v1/models/digits:predict",
        grpc_port=server.grpc_port,
        channel=None,
        custom_attributes=None,
        request_content_type=content_type,
        accept_header=accept,
        content_length=None,
    )


def invoke(handlers: ModuleType, body: bytes, ctx: Context):
    """What the Python service does: input_handler, POST to rest_uri, output_handler."""
    request_body = handlers.input_handler(io.BytesIO(body), ctx)
    response = requests.post(ctx.rest_uri, data=request_body, timeout=60)
    return handlers.output_handler(response, ctx)


def example(jpeg: bytes | None, label: int, **extra: tf.train.Feature) -> bytes:
    feature = {"image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
    if jpeg is not None:
        feature["image/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg]))
    feature.update(extra)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def tfrecord_file(tmp_path_factory) -> tuple[bytes, list[bytes], list[int]]:
    """(file bytes, bare records, labels) of the digits test set written by tf.io."""
    path = tmp_path_factory.mktemp("tfrecords") / "digits.tfrecord"
    samples = em.digits_test_set()
    records = [example(jpeg, label) for jpeg, label in samples]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path.read_bytes(), records, [label for _, label in samples]


# ----- jpeg_images: the documented handlers, unchanged ------------------------------------------


def test_jpeg_handlers_classify_every_held_out_digit(server, jpeg):
    ctx = context(server, "application/x-image")
    correct = 0
    samples = em.digits_test_set()
    for image, label in samples:
        body, content_type = invoke(jpeg, image, ctx)
        assert content_type == "application/json"
        (prediction,) = json.loads(body)["predictions"]
        assert len(prediction["probabilities"]) == em.DIGITS_CLASSES
        correct += prediction["classes"] == label
    assert correct / len(samples) >= MIN_ACCURACY


def test_jpeg_input_handler_sends_b64_instances(jpeg):
    ctx = Context(*[None] * 7, "application/x-image", "application/json", None)
    body = jpeg.input_handler(io.BytesIO(b"\xff\xd8abc"), ctx)
    assert json.loads(body) == {"instances": [{"b64": base64.b64encode(b"\xff\xd8abc").decode()}]}


@pytest.mark.parametrize(("content_type", "named"), [("text/csv", "text/csv"), (None, "unknown")])
def test_jpeg_input_handler_rejects_other_content_types(jpeg, content_type, named):
    ctx = Context(*[None] * 7, content_type, "application/json", None)
    with pytest.raises(ValueError, match=f'"unsupported content type {named}"'):
        jpeg.input_handler(io.BytesIO(b"x"), ctx)


def test_jpeg_output_handler_raises_the_model_server_error(server, jpeg):
    ctx = context(server, "application/x-image")
    with pytest.raises(ValueError, match="Unknown image file format"):
        invoke(jpeg, b"this is not a JPEG", ctx)


# ----- tfrecord_examples: framed (MultiRecord) and bare (SingleRecord) bodies -------------------


def test_tfrecord_multi_record_body_gives_one_line_per_record_in_order(
    server, tfrecord, tfrecord_file
):
    body, records, labels = tfrecord_file
    ctx = context(server, "application/x-tfexample", "application/jsonlines")
    out, content_type = invoke(tfrecord, body, ctx)
    assert content_type == "application/jsonlines"
    assert not out.endswith("\n")
    lines = [json.loads(line) for line in out.split("\n")]
    assert len(lines) == len(records)
    classes = [line["classes"] for line in lines]
    accuracy = sum(c == y for c, y in zip(classes, labels, strict=True)) / len(labels)
    assert accuracy >= MIN_ACCURACY
    # SingleRecord: each bare record alone gives the same line; so does one framed record.
    for i in range(0, len(records), 40):
        single, _ = invoke(tfrecord, records[i], ctx)
        assert json.loads(single)["classes"] == classes[i]
        one_framed, _ = invoke(tfrecord, _frame(records[i]), ctx)
        assert json.loads(one_framed)["classes"] == classes[i]


def test_tfrecord_records_match_tensorflow(tfrecord, tfrecord_file):
    body, records, _ = tfrecord_file
    assert tfrecord.records(body) == records
    assert tfrecord.records(records[0]) == [records[0]]  # bare: the whole body
    assert tfrecord.records(b"") == []
    for record in (b"", b"x" * 3, records[0]):
        assert tfrecord.records(_frame(record)) == [record]


def _frame(record: bytes) -> bytes:
    """One TFRecord frame, as tf.io.TFRecordWriter writes it."""
    from crc32c import crc32c

    def mask(data: bytes) -> int:
        crc = crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", mask(length)) + record + struct.pack("<I", mask(record))


def test_tfrecord_crc_python_fallback_matches_crc32c(tfrecord):
    from crc32c import crc32c

    for data in (b"", b"123456789", bytes(range(256)) * 5):
        assert tfrecord._crc32c_python(data) == crc32c(data)
    assert tfrecord._crc32c_python(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_tfrecord_corrupt_and_truncated_bodies_are_rejected(tfrecord, tfrecord_file):
    body, records, _ = tfrecord_file
    first = len(_frame(records[0]))
    corrupt = bytearray(body)
    corrupt[first - 10] ^= 0xFF  # inside the first record's data
    with pytest.raises(ValueError, match="corrupt TFRecord data at byte 0"):
        tfrecord.records(bytes(corrupt))
    bad_length = bytearray(body)
    bad_length[first] ^= 0x01  # the second record's length
    with pytest.raises(ValueError, match=f"corrupt TFRecord length at byte {first}"):
        tfrecord.records(bytes(bad_length))
    with pytest.raises(ValueError, match="truncated TFRecord at byte"):
        tfrecord.records(body[:-1])
    with pytest.raises(ValueError, match="truncated TFRecord header"):
        tfrecord.records(body + body[:5])


def test_tfrecord_feature_bytes_reads_tf_examples(tfrecord):
    jpeg = b"\xff\xd8 fake jpeg"
    rich = example(
        jpeg,
        3,
        **{
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
            "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[2**40, -1])),
            "score": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, 1.5])),
            "zz": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"b"])),
        },
    )
    assert tfrecord.feature_bytes(rich, b"image/encoded") == jpeg
    assert tfrecord.feature_bytes(rich, b"zz") == b"a"
    with pytest.raises(ValueError, match='no bytes feature image/encoded"'):
        tfrecord.feature_bytes(example(None, 3), b"image/encoded")
    with pytest.raises(ValueError, match="no bytes feature image/class/label"):
        tfrecord.feature_bytes(rich, b"image/class/label")  # an int64 feature
    with pytest.raises(ValueError, match=r"malformed tf\.Example"):
        tfrecord.feature_bytes(rich[:-3], b"image/encoded")


def test_tfrecord_input_handler_errors(tfrecord, tfrecord_file):
    _, records, _ = tfrecord_file

    def ctx(content_type):
        return Context(*[None] * 7, content_type, "application/jsonlines", None)

    body = tfrecord.input_handler(io.BytesIO(records[0]), ctx("application/x-tfexample; x=1"))
    assert len(json.loads(body)["instances"]) == 1
    for content_type, named in (("application/x-image", "application/x-image"), (None, "unknown")):
        with pytest.raises(ValueError, match=f'"unsupported content type {named}"'):
            tfrecord.input_handler(io.BytesIO(records[0]), ctx(content_type))
    with pytest.raises(ValueError, match="holds no records"):
        tfrecord.input_handler(io.BytesIO(b""), ctx("application/x-tfexample"))


def test_tfrecord_output_handler_raises_the_model_server_error(server, tfrecord):
    ctx = context(server, "application/x-tfexample", "application/jsonlines")
    with pytest.raises(ValueError, match="Unknown image file format"):
        invoke(tfrecord, example(b"not a jpeg", 1), ctx)


# ----- run.py: each walkthrough end to end through the whole stack (serve) ----------------------


@pytest.fixture(scope="module")
def examples_work_dir(digits_model, tmp_path_factory) -> Path:
    """A work dir for run.py holding the session's digits model (so nothing is retrained)."""
    work = tmp_path_factory.mktemp("examples_work")
    cached = work / "models" / "digits" / "1"
    cached.parent.mkdir(parents=True)
    os.symlink(digits_model / "1", cached)
    return work


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("jpeg_images/run.py", ["accuracy: "]),
        ("tfrecord_examples/run.py", ["MultiRecord: 4 requests", "SingleRecord: 359 requests"]),
    ],
)
def test_run_py_end_to_end(examples_work_dir, script, expected):
    env = {**os.environ, "EXAMPLES_WORK_DIR": str(examples_work_dir)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for text in expected:
        assert text in done.stdout
    assert "FAILED" not in done.stdout
