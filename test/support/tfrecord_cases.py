"""Corrupt TFRecord bodies, each with the frame the walker stops at and why. The walker's tests
and both its callers' (the service's tf.Example decoder, the batch runner's TFRecord split) run
this one table, each checking its own phrasing of the error."""

from __future__ import annotations

from dataclasses import dataclass

from sagemaker_serving.formats.tfrecord import frame_tfrecord

FIRST = frame_tfrecord(b"hello")
GOOD = FIRST + frame_tfrecord(b"world")
SECOND = len(FIRST)  # where the second frame starts
SECOND_DATA = SECOND + 12  # where its data starts


@dataclass(frozen=True)
class Corruption:
    """`data` breaks the framing at frame `index`, which starts at byte `offset`."""

    name: str
    data: bytes
    index: int
    offset: int
    reason: str

    @property
    def in_data(self) -> bool:
        """Only the data CRC is wrong: the frames themselves walk to the end."""
        return self.reason == "data CRC mismatch"


CORRUPTIONS = [
    Corruption("truncated-header", GOOD[: SECOND + 10], 1, SECOND, "truncated header"),
    Corruption(
        "length-crc", GOOD[:SECOND] + b"\x01" + GOOD[SECOND + 1 :], 1, SECOND, "length CRC mismatch"
    ),
    Corruption("truncated-data", GOOD[:-1], 1, SECOND, "truncated data (5 bytes)"),
    Corruption(
        "data-crc",
        GOOD[:SECOND_DATA] + b"W" + GOOD[SECOND_DATA + 1 :],
        1,
        SECOND,
        "data CRC mismatch",
    ),
    Corruption("first-frame", GOOD[1:], 0, 0, "length CRC mismatch"),
]
