"""The Case type of format_cases' table and what it is written with: builders of successes
and of errors (worded by us or by a model server), payloads (.npy, hand-encoded tf.Examples,
TFRecord frames) and the example models' answers."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from sagemaker_serving.formats.tfrecord import frame_tfrecord

JSON = "application/json"
JSONL = "application/jsonlines"
CSV = "text/csv"
NOT_ACCEPTABLE = "(supported: application/json, application/jsonlines, text/csv)"
PATHS = ("fast", "user", "multi_model")


@dataclass(frozen=True)
class Case:
    """One request and the answer every path gives."""

    name: str
    body: bytes
    content_type: str | None = JSON  # None: no Content-Type header
    accept: str | None = None  # None: no Accept header
    model: str = "half_plus_three"
    attributes: str = ""  # X-Amzn-SageMaker-Custom-Attributes beyond the model's name
    repeated_attributes: str | None = None  # a second X-Amzn-SageMaker-Custom-Attributes
    status: int = 200
    response_type: str = JSON
    expected: bytes = b""  # the exact body of a success
    error: str | None = None  # the exact error message
    error_part: str | None = None  # a part of a model server's message
    grpc: bool = False  # the built-in paths send it as gRPC Predict tensors
    paths: tuple[str, ...] = PATHS  # where the case applies


def ok(name: str, body: bytes | str, expected: bytes | str, **fields) -> Case:
    """A success; `response_type` follows `accept` unless given."""
    body = body.encode() if isinstance(body, str) else body
    expected = expected.encode() if isinstance(expected, str) else expected
    return Case(name, body, expected=expected, **fields)


def fail(name: str, body: bytes | str, status: int, message: str, **fields) -> Case:
    """An error with an exact message (ours: every path writes it alike)."""
    body = body.encode() if isinstance(body, str) else body
    return Case(name, body, status=status, error=message, **fields)


def model_error(name: str, body: bytes | str, status: int, part: str, **fields) -> Case:
    """An error worded (in part) by another component (the model server, a parser): its
    status and a part of its message; every path must give the same message."""
    body = body.encode() if isinstance(body, str) else body
    return Case(name, body, status=status, error_part=part, **fields)


def empty_body_cases(prefix: str, content_type: str, blank: str, expected: str) -> list[Case]:
    """`<prefix>-empty` and `<prefix>-blank-lines` (a body of nothing but line breaks): 400s."""
    message = f"Empty request body: expected {expected}"
    return [
        fail(f"{prefix}-empty", "", 400, message, content_type=content_type),
        fail(f"{prefix}-blank-lines", blank, 400, message, content_type=content_type),
    ]


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def example(x: float) -> bytes:
    """A serialized tf.train.Example with one float feature `x` (hand-encoded protobuf)."""
    import struct

    floats = b"\x0a\x04" + struct.pack("<f", x)  # FloatList.value, packed
    feature = b"\x12" + bytes([len(floats)]) + floats  # Feature.float_list
    entry = b"\x0a\x01x" + b"\x12" + bytes([len(feature)]) + feature  # map entry "x"
    features = b"\x0a" + bytes([len(entry)]) + entry  # Features.feature
    return b"\x0a" + bytes([len(features)]) + features  # Example.features


def framed(*records: bytes) -> bytes:
    return b"".join(frame_tfrecord(record) for record in records)


# ----- the example models' answers ----------------------------------------------------------

HP3 = '{"predictions": [3.5, 4.0, 5.5]}'  # half_plus_three of 1.0, 2.0, 5.0
HP3_ROWS = '{"predictions": [[3.5, 4.0], [5.5, 8.0]]}'  # of [[1, 2], [5, 10]]

# The formats model on 1.0, -2.0 and 0.0: TF Serving's text of every kind of output.
FORMATS_BODY = '{"instances": [1.0, -2.0, 0.0]}'
FORMATS_ROWS = [
    (
        '{"f32": 0.333333343,"f64": 0.33333333333333331,"flag": true,"i64": 9007199254740994,'
        '"ratio": Infinity,"raw_bytes": {"b64": "MS4w"},"text": "x=1.0, \\"q\\"\\n"}',
        '0.333333343,0.33333333333333331,true,9007199254740994,Infinity,MS4w,"x=1.0, ""q""\n"',
    ),
    (
        '{"f32": -0.666666687,"f64": -0.66666666666666663,"flag": false,"i64": 9007199254740991,'
        '"ratio": -Infinity,"raw_bytes": {"b64": "LTIuMA=="},"text": "x=-2.0, \\"q\\"\\n"}',
        "-0.666666687,-0.66666666666666663,false,9007199254740991,-Infinity,LTIuMA==,"
        '"x=-2.0, ""q""\n"',
    ),
    (
        '{"f32": 0.0,"f64": 0.0,"flag": false,"i64": 9007199254740993,"ratio": NaN,'
        '"raw_bytes": {"b64": "MC4w"},"text": "x=0.0, \\"q\\"\\n"}',
        '0.0,0.0,false,9007199254740993,NaN,MC4w,"x=0.0, ""q""\n"',
    ),
]
FORMATS_JSON = '{"predictions": [' + ",".join(row for row, _ in FORMATS_ROWS) + "]}"
FORMATS_LINES = "".join(row + "\n" for row, _ in FORMATS_ROWS)
FORMATS_CSV = "".join(row + "\n" for _, row in FORMATS_ROWS)
