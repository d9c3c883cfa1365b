"""Splitting an input object into records, as SageMaker's `SplitType` does: `None` (the whole
object), `Line`, `RecordIO` (MXNet's framing) or `TFRecord`.

Each record keeps two forms:
- `framed`: its bytes exactly as in the object (a line with its terminator, a TFRecord frame with
  length and CRCs, RecordIO parts with magic, length and padding). MultiRecord bodies are these,
  back to back.
- `bare`: the payload without framing. SingleRecord bodies are these (for `Line`, the line as in
  the object, terminator included: framing is removed only for the binary split types).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from sagemaker_serving.formats.tfrecord import TFRecordError, read_tfrecords

__all__ = ["SPLIT_TYPES", "FramingError", "Record", "frame_recordio", "split_records"]

SPLIT_TYPES = ("None", "Line", "RecordIO", "TFRecord")

RECORDIO_MAGIC = 0xCED7230A
_RECORDIO_LENGTH_MASK = (1 << 29) - 1
_U32 = struct.Struct("<I")


class FramingError(ValueError):
    """The object's bytes do not follow the split type's framing."""


@dataclass(frozen=True)
class Record:
    """One record of an input object: `framed` as in the object, `bare` without framing."""

    framed: bytes
    bare: bytes


def split_records(data: bytes, split_type: str) -> list[Record]:
    """The records of `data` for a SplitType (None, Line, RecordIO, TFRecord).

    An empty object has no records. `Line` splits after every `\\n`; a line holding nothing but
    its terminator (`\\n` or `\\r\\n`) is not a record. Raises FramingError on corrupt framing.
    """
    splitter = _SPLITTERS.get(split_type)
    if splitter is None:
        raise ValueError(f"unknown split type {split_type!r}; expected one of {SPLIT_TYPES}")
    if not data:
        return []
    return splitter(data)


def _split_none(data: bytes) -> list[Record]:
    return [Record(data, data)]


def _split_lines(data: bytes) -> list[Record]:
    records: list[Record] = []
    for line in _lines(data):
        if line in (b"\n", b"\r\n"):
            continue
        records.append(Record(line, line))
    return records


def _lines(data: bytes) -> list[bytes]:
    """Lines split after each `\\n` only (bytes.splitlines also splits on `\\r` and others)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _split_tfrecord(data: bytes) -> list[Record]:
    try:
        return [
            Record(data[frame.offset : frame.stop], data[frame.start : frame.end])
            for frame in read_tfrecords(data)
        ]
    except TFRecordError as err:
        raise FramingError(f"TFRecord {err.index} at byte {err.offset}: {err.reason}") from None


def frame_recordio(payload: bytes) -> bytes:
    """One complete RecordIO record (cflag 0) as MXNet/dmlc and SageMaker's SDK write it.

    Payloads that contain the magic number at a 4-byte boundary would need the multi-part form;
    this writer (for tests and tools) rejects them instead.
    """
    magic = _U32.pack(RECORDIO_MAGIC)
    if any(payload[i : i + 4] == magic for i in range(0, len(payload) - 3, 4)):
        raise ValueError("payload contains the RecordIO magic at an aligned offset")
    if len(payload) > _RECORDIO_LENGTH_MASK:
        raise ValueError("payload too large for one RecordIO record")
    return magic + _U32.pack(len(payload)) + payload + b"\0" * (-len(payload) % 4)


def _split_recordio(data: bytes) -> list[Record]:
    """MXNet RecordIO: `magic | lrecord | data | pad to 4`, where lrecord's top 3 bits are cflag
    (0 whole, 1 start, 2 middle, 3 end) and the low 29 the length. A record split into parts
    because its data held the magic is joined back with the magic between the parts (dmlc)."""
    magic = _U32.pack(RECORDIO_MAGIC)
    records: list[Record] = []
    pos = 0
    start = 0
    parts: list[bytes] = []
    while pos < len(data):
        index = len(records)
        if len(data) - pos < 8:
            raise FramingError(f"RecordIO record {index} at byte {pos}: truncated header")
        head_magic, lrecord = struct.unpack_from("<II", data, pos)
        if head_magic != RECORDIO_MAGIC:
            raise FramingError(
                f"RecordIO record {index} at byte {pos}: bad magic 0x{head_magic:08X} "
                f"(expected 0x{RECORDIO_MAGIC:08X})"
            )
        cflag, length = lrecord >> 29, lrecord & _RECORDIO_LENGTH_MASK
        if cflag > 3 or (cflag in (0, 1)) != (not parts):
            raise FramingError(f"RecordIO record {index} at byte {pos}: unexpected cflag {cflag}")
        if not parts:
            start = pos
        end = pos + 8 + length
        if end > len(data):
            raise FramingError(f"RecordIO record {index} at byte {pos}: truncated data")
        parts.append(data[pos + 8 : end])
        pad = -length % 4
        if data[end : end + pad].strip(b"\0"):
            raise FramingError(f"RecordIO record {index} at byte {pos}: non-zero padding")
        pos = min(end + pad, len(data))  # the last record's padding may be missing
        if cflag in (0, 3):
            records.append(Record(data[start:pos], magic.join(parts)))
            parts = []
    if parts:
        raise FramingError(f"RecordIO record {len(records)}: multi-part record without its end")
    return records


_SPLITTERS: dict[str, Callable[[bytes], list[Record]]] = {
    "None": _split_none,
    "Line": _split_lines,
    "RecordIO": _split_recordio,
    "TFRecord": _split_tfrecord,
}
