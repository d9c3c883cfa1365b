# SageMaker TensorFlow Serving pre/post-processing script for TFRecord files of tf.Example
# images (the classic Batch Transform walkthrough). Each tf.Example holds a JPEG in the feature
# "image/encoded". A request body (Content-Type application/x-tfexample) is either
#   - SplitType=TFRecord, BatchStrategy=MultiRecord: several framed TFRecords back to back
#     (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the data), or
#   - SplitType=TFRecord, BatchStrategy=SingleRecord: one bare serialized tf.Example.
# input_handler sends every record's image to the model as {"b64": ...}; output_handler
# answers one JSON line per record, in order (application/jsonlines), ready for
# AssembleWith=Line.
#
# Only the standard library is used: importing TensorFlow in every handler worker would
# cost seconds and hundreds of MB, and the serving image needs no TensorFlow for this.
# (The `crc32c` package, when installed, makes the CRC checks faster.)
import base64
import json
import struct

_HEADER = struct.Struct("<QI")  # length, masked CRC of the length
_FOOTER = struct.Struct("<I")  # masked CRC of the data
_IMAGE_FEATURE = b"image/encoded"
CONTENT_TYPE = "application/x-tfexample"


def input_handler(data, context):
    """TFRecord body -> TF Serving request {"instances": [{"b64": <JPEG>}, ...]}."""
    media_type = (context.request_content_type or "").split(";")[0].strip().lower()
    if media_type != CONTENT_TYPE:
        raise ValueError(
            '{{"error": "unsupported content type {}"}}'.format(
                context.request_content_type or "unknown"
            )
        )
    payload = data.read()
    instances = [
        {"b64": base64.b64encode(feature_bytes(record, _IMAGE_FEATURE)).decode("utf-8")}
        for record in records(payload)
    ]
    if not instances:
        raise ValueError('{"error": "the request body holds no records"}')
    return json.dumps({"instances": instances})


def output_handler(response, context):
    """TF Serving response -> one JSON line per prediction (no trailing newline)."""
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    predictions = json.loads(response.content)["predictions"]
    return "\n".join(json.dumps(p) for p in predictions), "application/jsonlines"


# ----- TFRecord framing ------------------------------------------------------------------


def records(body):
    """The records of a body: framed TFRecords, or the whole body as one bare record.

    A body is framed when its first 12 bytes are a length and that length's valid masked
    CRC-32C (a bare tf.Example matches by chance with probability 2**-32).
    """
    if len(body) >= _HEADER.size + _FOOTER.size:
        _length, length_crc = _HEADER.unpack_from(body)
        if length_crc == masked_crc32c(body[:8]):
            return list(_framed_records(body))
    return [body] if body else []


def _framed_records(body):
    pos = 0
    while pos < len(body):
        if len(body) - pos < _HEADER.size:
            raise ValueError(f"truncated TFRecord header at byte {pos}")
        length, length_crc = _HEADER.unpack_from(body, pos)
        if length_crc != masked_crc32c(body[pos : pos + 8]):
            raise ValueError(f"corrupt TFRecord length at byte {pos} (CRC mismatch)")
        start = pos + _HEADER.size
        end = start + length
        if end + _FOOTER.size > len(body):
            raise ValueError(f"truncated TFRecord at byte {pos}: {length} bytes announced")
        record = body[start:end]
        (data_crc,) = _FOOTER.unpack_from(body, end)
        if data_crc != masked_crc32c(record):
            raise ValueError(f"corrupt TFRecord data at byte {pos} (CRC mismatch)")
        yield record
        pos = end + _FOOTER.size


def masked_crc32c(data):
    """TFRecord's masked CRC-32C (Castagnoli) of `data`."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _crc32c_table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def _crc32c_python(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    from crc32c import crc32c as _crc32c
except ImportError:
    _crc32c = _crc32c_python


# ----- tf.train.Example, read from the protobuf wire format ---------------------------------
# Example {features = 1: Features}; Features {feature = 1: map<string, Feature>} (entries with
# key = 1, value = 2); Feature {bytes_list = 1: BytesList}; BytesList {value = 1: repeated bytes}


def feature_bytes(example, name):
    """The first bytes value of feature `name` in a serialized tf.train.Example."""
    found = None
    for features in _messages(example, 1):
        for entry in _messages(features, 1):
            keys = list(_messages(entry, 1))
            if keys and keys[-1] == name:
                found = b"".join(_messages(entry, 2))  # repeated fields merge
    for bytes_list in _messages(found or b"", 1):
        for value in _messages(bytes_list, 1):
            return value
    raise ValueError(
        '{{"error": "record has no bytes feature {}"}}'.format(name.decode("utf-8", "replace"))
    )


def _messages(message, number):
    """The length-delimited values of field `number` in a serialized protobuf message."""
    pos = 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _varint(message, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = _varint(message, pos)
            if pos + length > len(message):
                raise ValueError("malformed tf.Example: truncated field")
            if field == number:
                yield message[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"malformed tf.Example: wire type {wire_type}")
    if pos != len(message):
        raise ValueError("malformed tf.Example: truncated field")


def _varint(message, pos):
    result = shift = 0
    while True:
        if pos >= len(message) or shift > 63:
            raise ValueError("malformed tf.Example: bad varint")
        byte = message[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
