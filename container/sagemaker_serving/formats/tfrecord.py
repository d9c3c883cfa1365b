"""TFRecord framing, as tf.io.TFRecordWriter writes it: each record is a uint64 length, the
masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data (little-endian).

The one walker of the service (a 400 for a bad frame) and of the batch runner (which names the
input object and the offset that failed): both phrase a TFRecordError their own way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

__all__ = [
    "Frame",
    "TFRecordError",
    "frame_tfrecord",
    "masked_crc32c",
    "read_tfrecords",
    "walk_frames",
]

_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")  # length, masked CRC-32C of the length
_U32 = struct.Struct("<I")


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC-32C."""
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_tfrecord(record: bytes) -> bytes:
    """One TFRecord frame: uint64 length, masked CRC-32C of it, the data, masked CRC-32C of it."""
    length = struct.pack("<Q", len(record))
    return length + _U32.pack(masked_crc32c(length)) + record + _U32.pack(masked_crc32c(record))


@dataclass(eq=False)
class TFRecordError(ValueError):
    """Bytes that break the framing: the frame's index (from 0), its first byte, the reason."""

    index: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"TFRecord {self.index} at byte {self.offset}: {self.reason}"


@dataclass(frozen=True)
class Frame:
    """One frame: `data[offset:stop]` is the frame, `data[start:end]` the record it holds."""

    index: int
    offset: int
    start: int
    end: int
    data_crc: int

    @property
    def stop(self) -> int:
        """Just past the frame (its data CRC)."""
        return self.end + _U32.size

    def check(self, data: bytes) -> None:
        """Raise TFRecordError when the record's bytes do not match its data CRC."""
        if masked_crc32c(memoryview(data)[self.start : self.end]) != self.data_crc:
            raise TFRecordError(self.index, self.offset, "data CRC mismatch")


def walk_frames(data: bytes) -> Iterator[Frame]:
    """The frames of `data`, first byte to last, each length CRC-checked (the data CRC is
    Frame.check's). Raises TFRecordError on a truncated header or data or a bad length CRC."""
    view = memoryview(data)
    pos = 0
    index = 0
    while pos < len(data):
        if len(data) - pos < _HEADER.size:
            raise TFRecordError(index, pos, "truncated header")
        length, length_crc = _HEADER.unpack_from(view, pos)
        if masked_crc32c(view[pos : pos + 8]) != length_crc:
            raise TFRecordError(index, pos, "length CRC mismatch")
        start = pos + _HEADER.size
        end = start + length
        if end + _U32.size > len(data):
            raise TFRecordError(index, pos, f"truncated data ({length} bytes)")
        frame = Frame(index, pos, start, end, _U32.unpack_from(view, end)[0])
        yield frame
        pos = frame.stop
        index += 1


def read_tfrecords(data: bytes) -> Iterator[Frame]:
    """walk_frames with each frame's data CRC checked before the frame is yielded."""
    for frame in walk_frames(data):
        frame.check(data)
        yield frame
