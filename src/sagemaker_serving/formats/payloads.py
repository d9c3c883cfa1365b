"""Client payloads <-> TF Serving REST JSON: request decoding and response encoding.

Pure functions of the Python service's built-in formats: requests in the content types
listed in BUILTIN_TYPES become TF Serving REST bodies (predict, classify, regress), by the same
rules as the njs fast path (nginx/tfs.js; the cases are in test/format_cases.py). Bare
NaN/Infinity/-Infinity tokens are accepted. Answers are converted by answers.py.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import csv
import io
import json
import math
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import crc32c
import orjson
from google.protobuf.message import DecodeError

from sagemaker_serving.errors import StatusError
from sagemaker_serving.tfs_client.wire import (  # TF's protos' wire subset: no TensorFlow
    DTYPE_ENUM_NAMES,
    Example,
)

__all__ = [
    "BUILTIN_TYPES",
    "InputSpec",
    "ModelRequest",
    "PayloadError",
    "decode_request",
    "frame_tfrecord",
    "masked_crc32c",
    "media_type",
    "parse_examples",
    "signature_inputs",
    "signature_outputs",
    "split_tfrecords",
]


class PayloadError(StatusError, ValueError):
    """Bad client payload: status (400, 406, 415) and a message for the JSON error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, status)


@dataclass(frozen=True)
class InputSpec:
    """One signature input: alias, dtype name, shape (-1: unknown dim; None: unknown rank)."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None


@dataclass
class ModelRequest:
    """A TF Serving REST request body and how many input records it holds (None: not per record)."""

    body: bytes
    records: int | None


JSON = "application/json"
# curl -d sends application/x-www-form-urlencoded: such bodies are read as JSON.
JSON_TYPES = frozenset({JSON, "application/x-www-form-urlencoded"})
JSON_LINES_NAMES = (
    "application/jsonlines",
    "application/jsons",
    "application/x-jsonlines",
    "application/json-lines",
    "application/x-ndjson",
    "application/ndjson",
)
JSON_LINES_TYPES = frozenset(JSON_LINES_NAMES)
CSV = "text/csv"
BYTES_TYPES = frozenset({"application/x-image", "application/octet-stream"})
NPY = "application/x-npy"
TFEXAMPLE_TYPES = frozenset(
    {"application/x-tfexample", "application/tfrecord", "application/x-tfrecord"}
)

TEXT_TYPES = frozenset({*JSON_TYPES, *JSON_LINES_TYPES, CSV})
BINARY_TYPES = frozenset({NPY, *BYTES_TYPES, *TFEXAMPLE_TYPES})
BUILTIN_TYPES: frozenset[str] = TEXT_TYPES | BINARY_TYPES

METHODS = frozenset({"predict", "classify", "regress"})
REQUEST_KEYS = ("instances", "inputs", "examples")
# A body that starts as a TF Serving request does (its first key is a top-level key) passes
# through as it is, parsed or not: TF Serving names what is wrong with it.
TFS_REQUEST_START = re.compile(rb'\s*\{\s*"(?:instances|inputs|examples)"\s*:')


def media_type(header: str | None) -> str:
    """The media type of a Content-Type/Accept value: lower-case, params stripped, "" if none."""
    if not header:
        return ""
    return header.split(";", 1)[0].strip().lower()


def _params(header: str) -> dict[str, str]:
    """Media-type parameters, names lower-cased, values unquoted."""
    params: dict[str, str] = {}
    for part in header.split(";")[1:]:
        name, sep, value = part.partition("=")
        if sep:
            params[name.strip().lower()] = value.strip().strip('"')
    return params


# ------------------------------------------------------------------------------ JSON


_CONSTANTS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _loads(data: bytes | str) -> tuple[Any, bool]:
    """Parse JSON allowing bare NaN/Infinity/-Infinity: (value, whether such tokens occurred)."""
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        pass
    seen: list[str] = []

    def constant(token: str) -> float:
        seen.append(token)
        return _CONSTANTS[token]

    try:
        return json.loads(data, parse_constant=constant), bool(seen)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def _dumps(value: Any, nonfinite: bool = False) -> bytes:
    """Compact JSON; non-finite floats (when `nonfinite`) as bare NaN/Infinity tokens."""
    if not nonfinite:
        try:
            return orjson.dumps(value)
        except TypeError:  # e.g. integers beyond 64 bits
            pass
    text = json.dumps(value, allow_nan=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def _key(name: str) -> bytes:
    return orjson.dumps(name)


def _wrap(key: str, items: bytes) -> bytes:
    """`{"<key>": <items>}` around an already encoded JSON value."""
    return b'{"' + key.encode() + b'":' + items + b"}"


def _batch_key(method: str) -> str:
    return "examples" if method in ("classify", "regress") else "instances"


# ------------------------------------------------------------------- signature inputs


def _dim(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


def _dtype_name(value: Any) -> str:
    if isinstance(value, int):
        return DTYPE_ENUM_NAMES.get(value, f"DataType {value}")
    return str(value) if value else "DT_INVALID"


def signature_inputs(
    metadata: dict, signature_name: str = "serving_default"
) -> dict[str, InputSpec]:
    """Inputs of one signature from TF Serving's GET /v1/models/<m>/metadata JSON, by alias.

    InputSpec.name is the alias (the key requests use), not the graph tensor name.
    """
    return _signature_tensors(metadata, signature_name, "inputs")


def signature_outputs(
    metadata: dict, signature_name: str = "serving_default"
) -> dict[str, InputSpec]:
    """Outputs of one signature, by alias (the names TF Serving responses use)."""
    return _signature_tensors(metadata, signature_name, "outputs")


def _signature_tensors(metadata: dict, signature_name: str, side: str) -> dict[str, InputSpec]:
    try:
        signatures = metadata["metadata"]["signature_def"]["signature_def"]
    except (KeyError, TypeError) as err:
        raise ValueError(f"model metadata has no signature_def: {err!r}") from None
    if signature_name not in signatures:
        available = ", ".join(sorted(signatures)) or "none"
        raise PayloadError(
            400,
            f'Serving signature name: "{signature_name}" not found in signature def '
            f"(available: {available})",
        )
    specs: dict[str, InputSpec] = {}
    for alias, info in (signatures[signature_name].get(side) or {}).items():
        shape_info = info.get("tensor_shape")
        shape: tuple[int, ...] | None
        if shape_info is None or shape_info.get("unknown_rank"):
            shape = None
        else:
            shape = tuple(_dim(d.get("size")) for d in shape_info.get("dim") or ())
        specs[alias] = InputSpec(alias, _dtype_name(info.get("dtype")), shape)
    return specs


def _string_inputs(inputs: Mapping[str, InputSpec]) -> list[str]:
    return [name for name, spec in inputs.items() if spec.dtype == "DT_STRING"]


# --------------------------------------------------------------------------- request


def decode_request(
    body: bytes,
    content_type: str,
    inputs: Mapping[str, InputSpec] | None,
    method: str = "predict",
) -> ModelRequest:
    """Turn a client payload into a TF Serving REST request body for `method`.

    `inputs` (from signature_inputs) steers the binary formats; None means unknown.
    Raises PayloadError (400 bad payload, 415 unsupported type or no fitting model input).
    """
    with client_bytes(content_type):
        return _decode_request(body, content_type, inputs, method)


@contextlib.contextmanager
def client_bytes(content_type: str | None) -> Iterator[None]:
    """Whatever a decoder raises on the client's bytes is a 400 (a corrupt .npz, an invalid
    code point in a `<U` array, JSON nested too deeply...), never a 500."""
    try:
        yield
    except (PayloadError, MemoryError):
        raise
    except Exception as err:
        what = media_type(content_type) or "request"
        raise PayloadError(
            400, f"Could not decode the {what} body: {type(err).__name__}: {err}"
        ) from None


def _decode_request(
    body: bytes,
    content_type: str,
    inputs: Mapping[str, InputSpec] | None,
    method: str,
) -> ModelRequest:
    if method not in METHODS:
        raise PayloadError(
            400, f"Unsupported method: {method} (expected predict, classify or regress)"
        )
    ctype = media_type(content_type)
    if ctype in JSON_TYPES:
        return _decode_json(body, method)
    if ctype in JSON_LINES_TYPES:
        return _decode_json_lines(body, method)
    if ctype == CSV:
        params = _params(content_type)
        header = params.get("header", "").lower() == "present"
        return _decode_csv(body, params.get("charset", "utf-8"), header, method)
    if ctype in BYTES_TYPES:
        return _decode_bytes(body, ctype, inputs)
    if ctype == NPY:
        return _decode_npy(body, inputs)
    if ctype in TFEXAMPLE_TYPES:
        return _decode_tfexample(body, inputs, method)
    raise PayloadError(415, f"Unsupported Media Type: {content_type or 'Unknown'}")


def _strip_bom(body: bytes) -> bytes:
    return body[3:] if body.startswith(codecs.BOM_UTF8) else body


def _decode_json(body: bytes, method: str) -> ModelRequest:
    body = _strip_bom(body)
    text = body.strip()
    if not text:
        raise PayloadError(400, "Empty request body: expected JSON")
    try:
        value, _ = _loads(text)
    except ValueError as err:
        if TFS_REQUEST_START.match(body[:64]):
            return ModelRequest(body, None)
        lines = [line.strip() for line in text.splitlines()]
        if sum(1 for line in lines if line) > 1:
            try:
                return _json_lines(lines, method)
            except PayloadError:
                pass
        raise PayloadError(400, f"Malformed JSON: {err}") from None
    if _is_tfs_request(value):
        return ModelRequest(body, _batch_size(value))
    key = _batch_key(method)
    if isinstance(value, list) and value and all(isinstance(item, list) for item in value):
        return ModelRequest(_wrap(key, text), len(value))
    return ModelRequest(_wrap(key, b"[" + text + b"]"), 1)


def _is_tfs_request(value: Any) -> bool:
    return isinstance(value, dict) and any(key in value for key in REQUEST_KEYS)


def _batch_size(request: dict) -> int | None:
    batch = request.get("instances", request.get("examples"))
    return len(batch) if isinstance(batch, list) else None


def _json_lines(lines: list[bytes], method: str) -> ModelRequest:
    """One instance per non-empty line; `lines` are stripped, numbered from 1. A single line
    holding a TF Serving request passes through."""
    items, first = [], None
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            value, _ = _loads(line)
        except ValueError as err:
            raise PayloadError(400, f"Malformed JSON Lines: line {number}: {err}") from None
        first = value if first is None else first
        items.append(line)
    if not items:
        raise PayloadError(400, "Empty request body: expected JSON Lines")
    if len(items) == 1 and _is_tfs_request(first):
        return ModelRequest(items[0], _batch_size(first))
    return ModelRequest(_wrap(_batch_key(method), b"[" + b",".join(items) + b"]"), len(items))


def _decode_json_lines(body: bytes, method: str) -> ModelRequest:
    return _json_lines([line.strip() for line in _strip_bom(body).split(b"\n")], method)


# ------------------------------------------------------------------------------- CSV

_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)\Z")
_NONFINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
# One RFC 4180 field at a position: quoted (with "" escapes, lenient tail) or plain.
_CSV_FIELD = re.compile(r'"(?:[^"]+|"")*"?[^,]*|[^,]*')
# A field may be as long as the body (whose size nginx limits); the csv module's default
# limit (128 KiB) would refuse a long text or a base64 image.
csv.field_size_limit(2**62)


class _LineTap:
    """Line iterator for csv.reader that remembers the raw text of the record being read."""

    def __init__(self, text: str) -> None:
        self._lines = iter(io.StringIO(text, newline=""))
        self.raw: list[str] = []

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.raw.append(line)
        return line


def _quoted_fields(raw: str) -> list[bool]:
    """Which fields of one raw CSV record were quoted."""
    raw = raw.rstrip("\r\n")
    flags, pos = [], 0
    while True:
        match = _CSV_FIELD.match(raw, pos)
        flags.append(raw.startswith('"', pos))
        pos = match.end() if match else len(raw)
        if pos >= len(raw):
            return flags
        pos += 1  # the comma


def _csv_value(field: str) -> tuple[Any, bool]:
    """An unquoted CSV field: (int | float | str, is non-finite)."""
    token = field.strip()
    if _INT.match(token):
        return int(token), False
    if _FLOAT.match(token):
        return float(token), False
    if token.lower() in _NONFINITE:
        return float(token), True
    return field, False


def _decode_csv(body: bytes, charset: str, header: bool, method: str) -> ModelRequest:
    """RFC 4180 rows (skipping a header row for `header=present`) as instances."""
    try:
        text = body.decode("utf-8-sig" if charset.lower() in ("utf-8", "utf8") else charset)
    except LookupError:
        raise PayloadError(415, f"Unsupported Media Type: text/csv; charset={charset}") from None
    except UnicodeDecodeError as err:
        raise PayloadError(400, f"Malformed CSV: not valid {charset}: {err}") from None
    tap = _LineTap(text)
    reader = csv.reader(tap, strict=False)
    rows: list[Any] = []
    nonfinite = False
    width = None
    start = 1
    try:
        for fields in reader:
            line, start = start, reader.line_num + 1
            raw = "".join(tap.raw)
            tap.raw.clear()
            if not fields:
                continue
            if header:
                header, width = False, len(fields)
                continue
            if width is None:
                width = len(fields)
            elif len(fields) != width:
                raise PayloadError(
                    400, f"Malformed CSV: line {line} has {len(fields)} fields, expected {width}"
                )
            quoted = _quoted_fields(raw) if '"' in raw else None
            row = []
            for index, field in enumerate(fields):
                if quoted is not None and index < len(quoted) and quoted[index]:
                    row.append(field)
                    continue
                value, special = _csv_value(field)
                nonfinite |= special
                row.append(value)
            rows.append(row[0] if width == 1 else row)
    except csv.Error as err:
        raise PayloadError(400, f"Malformed CSV: line {reader.line_num}: {err}") from None
    if not rows:
        raise PayloadError(400, "Empty request body: expected CSV rows")
    return ModelRequest(_wrap(_batch_key(method), _dumps(rows, nonfinite)), len(rows))


# ---------------------------------------------------------------------- raw bytes


def _decode_bytes(body: bytes, ctype: str, inputs: Mapping[str, InputSpec] | None) -> ModelRequest:
    if not body:
        raise PayloadError(400, f"Empty request body for {ctype}")
    b64 = b'{"b64":"' + base64.b64encode(body) + b'"}'
    if inputs is None or len(inputs) == 1:
        spec = next(iter(inputs.values())) if inputs else None
        if spec is not None and spec.dtype != "DT_STRING":
            raise _no_bytes_input(ctype, inputs)
        return ModelRequest(_wrap("instances", b"[" + b64 + b"]"), 1)
    strings = _string_inputs(inputs)
    if len(strings) != 1:
        raise _no_bytes_input(ctype, inputs)
    return ModelRequest(_wrap("instances", b"[{" + _key(strings[0]) + b":" + b64 + b"}]"), 1)


def _no_bytes_input(ctype: str, inputs: Mapping[str, InputSpec]) -> PayloadError:
    described = ", ".join(f"{name} ({spec.dtype})" for name, spec in inputs.items()) or "none"
    strings = _string_inputs(inputs)
    problem = (
        "has no DT_STRING input to take the raw bytes"
        if not strings
        else f"has several DT_STRING inputs ({', '.join(strings)}), so which one takes the bytes "
        "is ambiguous"
    )
    return PayloadError(
        415,
        f"Unsupported Media Type: {ctype}: the model's signature {problem} (inputs: {described}). "
        "Send JSON, or add a code/inference.py that converts the payload.",
    )


# ------------------------------------------------------------------------------ NPY


def _array_json(array: Any) -> bytes:
    """A numpy array (or 0-d array) as JSON; NaN/Infinity as bare tokens, bytes as b64."""
    import numpy as np

    kind = array.dtype.kind
    if kind in "biuf":
        nonfinite = kind == "f" and not bool(np.isfinite(array).all())
        if array.ndim and not nonfinite and array.dtype.isnative:  # (ascontiguousarray: 0-d -> 1-d)
            try:
                return orjson.dumps(np.ascontiguousarray(array), option=orjson.OPT_SERIALIZE_NUMPY)
            except TypeError:
                pass
        return _dumps(array.tolist(), nonfinite)
    if kind == "S":
        return _dumps(_b64_tree(array.tolist()))
    if kind == "U":
        return _dumps(array.tolist())
    if kind in "Mm":
        return _dumps(array.astype(str).tolist())
    raise PayloadError(400, f"application/x-npy: unsupported array dtype {array.dtype}")


def _b64_tree(value: Any) -> Any:
    if isinstance(value, list):
        return [_b64_tree(item) for item in value]
    return {"b64": base64.b64encode(value).decode("ascii")}


def npy_target(array: Any, inputs: Mapping[str, InputSpec]) -> str:
    """The input a lone array feeds in a multi-input signature: the best dtype/rank match."""

    def score(spec: InputSpec) -> tuple[int, int]:
        rank_ok = spec.shape is None or len(spec.shape) == array.ndim
        string_ok = (spec.dtype == "DT_STRING") == (array.dtype.kind in "SU")
        return int(rank_ok), int(string_ok)

    best = max(inputs.values(), key=score)
    return best.name


def _decode_npy(body: bytes, inputs: Mapping[str, InputSpec] | None) -> ModelRequest:
    import numpy as np

    try:
        loaded = np.load(io.BytesIO(body), allow_pickle=False)
    except Exception as err:  # numpy raises ValueError, OSError, EOFError, zipfile errors
        raise PayloadError(400, f"Could not read application/x-npy body: {err}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):  # .npz: one array per input name
        with loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        if not arrays:
            raise PayloadError(400, "application/x-npy: the .npz archive holds no arrays")
        columns = b",".join(_key(name) + b":" + _array_json(a) for name, a in arrays.items())
        sizes = {len(a) if a.ndim else 1 for a in arrays.values()}
        return ModelRequest(
            _wrap("inputs", b"{" + columns + b"}"), sizes.pop() if len(sizes) == 1 else None
        )
    array = loaded
    records = len(array) if array.ndim else 1
    if array.dtype.names:  # structured array: one column per field name
        columns = b",".join(
            _key(name) + b":" + _array_json(np.ascontiguousarray(array[name]))
            for name in array.dtype.names
        )
        return ModelRequest(_wrap("inputs", b"{" + columns + b"}"), records)
    encoded = _array_json(array)
    if inputs is None or len(inputs) <= 1:
        return ModelRequest(
            _wrap("instances", encoded if array.ndim else b"[" + encoded + b"]"), records
        )
    name = npy_target(array, inputs)
    return ModelRequest(_wrap("inputs", b"{" + _key(name) + b":" + encoded + b"}"), records)


# ------------------------------------------------------------------------- TFRecord

_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC-32C."""
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_tfrecord(record: bytes) -> bytes:
    """One TFRecord frame: uint64 length, masked CRC-32C of it, the data, masked CRC-32C of it."""
    length = struct.pack("<Q", len(record))
    return length + _U32.pack(masked_crc32c(length)) + record + _U32.pack(masked_crc32c(record))


def split_tfrecords(body: bytes) -> list[bytes] | None:
    """The records of a body of TFRecord frames, or None when the body is not framed.

    Framed means the frames, with valid length CRCs, walk to exactly the end of the body.
    A frame whose data CRC is wrong raises PayloadError(400) naming the record index.
    """
    view = memoryview(body)
    size = len(body)
    spans: list[tuple[int, int, int]] = []
    pos = 0
    while pos < size:
        if size - pos < 16:
            return None
        length, length_crc = _HEADER.unpack_from(view, pos)
        if masked_crc32c(view[pos : pos + 8]) != length_crc:
            return None
        start = pos + 12
        end = start + length
        if end + 4 > size:
            return None
        spans.append((start, end, _U32.unpack_from(view, end)[0]))
        pos = end + 4
    if not spans:
        return None
    records = []
    for index, (start, end, data_crc) in enumerate(spans):
        if masked_crc32c(view[start:end]) != data_crc:
            raise PayloadError(400, f"Corrupt TFRecord: record {index}: data CRC mismatch")
        records.append(body[start:end])
    return records


def parse_examples(records: list[bytes]) -> list[Any]:
    """The records as tf.train.Examples; one that is none is a 400 naming its index."""
    examples = []
    for index, record in enumerate(records):
        try:
            examples.append(Example.FromString(record))
        except DecodeError as err:
            raise PayloadError(
                400, f"Record {index} is not a serialized tf.train.Example: {err}"
            ) from None
    return examples


def _feature_values(feature: Any) -> tuple[str | None, list]:
    """(kind, values) of a tf.train.Feature; bytes as {"b64": ...} objects."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return None, []
    values = list(getattr(feature, kind).value)
    if kind == "bytes_list":
        values = [{"b64": base64.b64encode(v).decode("ascii")} for v in values]
    return kind, values


def _has_nonfinite(values: list) -> bool:
    return not all(map(math.isfinite, values))


def _example_json(example: Any) -> tuple[dict, bool]:
    """TF Serving's JSON form of a tf.train.Example (classify/regress) and a non-finite flag."""
    doc, nonfinite = {}, False
    for name, feature in example.features.feature.items():
        kind, values = _feature_values(feature)
        if kind == "float_list":
            nonfinite = nonfinite or _has_nonfinite(values)
        doc[name] = values[0] if len(values) == 1 else values
    return doc, nonfinite


def _decode_tfexample(
    body: bytes, inputs: Mapping[str, InputSpec] | None, method: str
) -> ModelRequest:
    if not body:
        raise PayloadError(400, "Empty request body: expected a serialized tf.train.Example")
    records = split_tfrecords(body) or [body]
    examples = parse_examples(records)
    count = len(records)
    if method in ("classify", "regress"):
        docs = [_example_json(example) for example in examples]
        nonfinite = any(flag for _, flag in docs)
        return ModelRequest(_dumps({"examples": [doc for doc, _ in docs]}, nonfinite), count)

    def b64(record: bytes) -> bytes:
        return b'{"b64":"' + base64.b64encode(record) + b'"}'

    if not inputs or (len(inputs) == 1 and _string_inputs(inputs)):
        return ModelRequest(_wrap("instances", b"[" + b",".join(map(b64, records)) + b"]"), count)
    strings = _string_inputs(inputs)
    serialized_input = strings[0] if len(strings) == 1 else None
    single = len(inputs) == 1
    instances, nonfinite = [], False
    for index, (record, example) in enumerate(zip(records, examples, strict=True)):
        features = example.features.feature
        instance: dict[str, Any] = {}
        for name, spec in inputs.items():
            if name in features:
                kind, values = _feature_values(features[name])
                if kind == "float_list":
                    nonfinite = nonfinite or _has_nonfinite(values)
                rank1 = spec.shape is not None and len(spec.shape) == 1
                instance[name] = values[0] if rank1 and len(values) == 1 else values
            elif name == serialized_input:
                instance[name] = {"b64": base64.b64encode(record).decode("ascii")}
            else:
                raise PayloadError(
                    400,
                    f"Record {index}: tf.train.Example has no feature {name!r} for the model "
                    f"input of that name (features: {', '.join(sorted(features)) or 'none'})",
                )
        instances.append(instance[next(iter(inputs))] if single else instance)
    return ModelRequest(_dumps({"instances": instances}, nonfinite), count)
