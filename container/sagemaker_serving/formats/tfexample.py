"""Serialized tf.train.Examples (one bare, or TFRecord frames of them) as TF Serving REST
requests: for classify/regress as JSON examples; for predict as the model's one string input
(base64) or features mapped to inputs by name."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request_body import ModelRequest, batch_key, dumps, wrap
from sagemaker_serving.formats.signature import InputSpec, single_string_input, string_inputs
from sagemaker_serving.formats.tfrecord import TFRecordError, walk_frames
from sagemaker_serving.tfs_client.wire import Example  # TF's protos' wire subset

__all__ = ["decode_tfexample", "parse_examples", "split_tfrecords"]


def split_tfrecords(body: bytes) -> list[bytes] | None:
    """The records of a body of TFRecord frames, or None when the body is not framed.

    Framed means the frames, with valid length CRCs, walk to exactly the end of the body.
    A frame whose data CRC is wrong raises PayloadError(400) naming the record index.
    """
    try:
        frames = list(walk_frames(body))
    except TFRecordError:
        return None
    if not frames:
        return None
    for frame in frames:
        try:
            frame.check(body)
        except TFRecordError as err:
            raise PayloadError(f"Corrupt TFRecord: record {err.index}: {err.reason}", 400) from None
    return [body[frame.start : frame.end] for frame in frames]


def parse_examples(records: list[bytes]) -> list[Any]:
    """The records as tf.train.Examples; one that is none is a 400 naming its index."""
    examples = []
    for index, record in enumerate(records):
        try:
            examples.append(Example.FromString(record))
        except DecodeError as err:
            raise PayloadError(
                f"Record {index} is not a serialized tf.train.Example: {err}", 400
            ) from None
    return examples


def decode_tfexample(
    body: bytes, inputs: Mapping[str, InputSpec] | None, method: str
) -> ModelRequest:
    """The examples for `method`; `inputs` (None: unknown) decides how predict feeds them."""
    if not body:
        raise PayloadError("Empty request body: expected a serialized tf.train.Example", 400)
    records = split_tfrecords(body) or [body]
    examples = parse_examples(records)
    count = len(records)
    if batch_key(method) == "examples":
        docs = [_example_json(example) for example in examples]
        nonfinite = any(flag for _, flag in docs)
        return ModelRequest(dumps({"examples": [doc for doc, _ in docs]}, nonfinite), count)

    def b64(record: bytes) -> bytes:
        return b'{"b64":"' + base64.b64encode(record) + b'"}'

    if not inputs or single_string_input(inputs) is not None:
        return ModelRequest(wrap("instances", b"[" + b",".join(map(b64, records)) + b"]"), count)
    strings = string_inputs(inputs)
    serialized_input = strings[0] if len(strings) == 1 else None
    single = len(inputs) == 1
    instances, nonfinite = [], False
    for index, (record, example) in enumerate(zip(records, examples, strict=True)):
        features = example.features.feature
        instance: dict[str, Any] = {}
        for name, spec in inputs.items():
            if name in features:
                values, special = _feature_values(features[name])
                nonfinite |= special
                rank1 = spec.shape is not None and len(spec.shape) == 1
                instance[name] = values[0] if rank1 and len(values) == 1 else values
            elif name == serialized_input:
                instance[name] = {"b64": base64.b64encode(record).decode("ascii")}
            else:
                raise PayloadError(
                    f"Record {index}: tf.train.Example has no feature {name!r} for the model "
                    f"input of that name (features: {', '.join(sorted(features)) or 'none'})",
                    400,
                )
        instances.append(instance[next(iter(inputs))] if single else instance)
    return ModelRequest(dumps({"instances": instances}, nonfinite), count)


def _feature_values(feature: Any) -> tuple[list, bool]:
    """A tf.train.Feature's values (bytes as {"b64": ...} objects) and whether any is a
    non-finite float."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return [], False
    values = list(getattr(feature, kind).value)
    if kind == "bytes_list":
        return [{"b64": base64.b64encode(v).decode("ascii")} for v in values], False
    return values, kind == "float_list" and not all(map(math.isfinite, values))


def _example_json(example: Any) -> tuple[dict, bool]:
    """TF Serving's JSON form of a tf.train.Example (classify/regress) and a non-finite flag."""
    doc, nonfinite = {}, False
    for name, feature in example.features.feature.items():
        values, special = _feature_values(feature)
        nonfinite |= special
        doc[name] = values[0] if len(values) == 1 else values
    return doc, nonfinite
