"""SplitType framing: Line, TFRecord (CRC-checked) and MXNet RecordIO (multi-part records)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfs_batch_transform.framing import (
    RECORDIO_MAGIC,
    FramingError,
    frame_recordio,
    frame_tfrecord,
    masked_crc32c,
    split_records,
)

MAGIC = struct.pack("<I", RECORDIO_MAGIC)
payloads = st.lists(st.binary(max_size=64), max_size=12)


def test_empty_object_has_no_records():
    for split in ("None", "Line", "RecordIO", "TFRecord"):
        assert split_records(b"", split) == []


def test_none_is_the_whole_object():
    [record] = split_records(b"a\nb\n", "None")
    assert record.framed == record.bare == b"a\nb\n"


def test_line_keeps_terminators_and_skips_blank_lines():
    records = split_records(b"a,1\r\n\nb,2\n\r\nc,3", "Line")
    assert [r.framed for r in records] == [b"a,1\r\n", b"b,2\n", b"c,3"]
    assert [r.bare for r in records] == [r.framed for r in records]


def test_line_splits_only_on_newline():
    # a lone \r (or other Unicode line breaks) is data, not a record boundary
    assert [r.bare for r in split_records(b"a\rb\x0bc\n", "Line")] == [b"a\rb\x0bc\n"]


@given(st.lists(st.binary(min_size=1).filter(lambda b: b"\n" not in b and b != b"\r"), max_size=10))
def test_line_round_trip(lines):
    data = b"".join(line + b"\n" for line in lines)
    records = split_records(data, "Line")
    assert b"".join(r.framed for r in records) == data
    assert [r.bare[:-1] for r in records] == lines


def test_tfrecord_frame_matches_tensorflow():
    # bytes of tf.io.TFRecordWriter writing b"hello" (TensorFlow 2.21)
    expected = bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19")
    assert frame_tfrecord(b"hello") == expected
    assert masked_crc32c(b"hello") == 0x191C1FBB


@given(payloads)
def test_tfrecord_round_trip(items):
    data = b"".join(frame_tfrecord(p) for p in items)
    records = split_records(data, "TFRecord")
    assert [r.bare for r in records] == items
    assert [r.framed for r in records] == [frame_tfrecord(p) for p in items]


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: d[:-1], "truncated data"),
        (lambda d: d[:10], "truncated header"),
        (lambda d: d[:12] + b"X" + d[13:], "data CRC mismatch"),
        (lambda d: b"\x01" + d[1:], "length CRC mismatch"),
    ],
)
def test_tfrecord_corruption_is_detected(corrupt, message):
    data = frame_tfrecord(b"hello") + frame_tfrecord(b"world")
    with pytest.raises(FramingError, match=message):
        split_records(corrupt(data[len(frame_tfrecord(b"hello")) :]), "TFRecord")


def test_tfrecord_error_names_the_record():
    data = frame_tfrecord(b"ok") + frame_tfrecord(b"bad")[:-1] + b"\0"
    with pytest.raises(FramingError, match=r"TFRecord 1 at byte 18"):
        split_records(data, "TFRecord")


@given(payloads.map(lambda items: [p for p in items if MAGIC not in p]))
def test_recordio_round_trip(items):
    data = b"".join(frame_recordio(p) for p in items)
    records = split_records(data, "RecordIO")
    assert [r.bare for r in records] == items
    assert b"".join(r.framed for r in records) == data
    assert all(len(r.framed) % 4 == 0 for r in records)


def _part(cflag: int, data: bytes) -> bytes:
    return MAGIC + struct.pack("<I", (cflag << 29) | len(data)) + data + b"\0" * (-len(data) % 4)


def test_recordio_multipart_record_is_joined_with_the_magic():
    # dmlc splits a record whose data holds the magic at an aligned offset into parts
    # (cflag 1 start, 2 middle, 3 end) and the reader joins them with the magic between.
    multi = _part(1, b"abcd") + _part(2, b"ef") + _part(3, b"ghij")
    data = _part(0, b"first") + multi + _part(0, b"last")
    records = split_records(data, "RecordIO")
    assert [r.bare for r in records] == [
        b"first",
        b"abcd" + MAGIC + b"ef" + MAGIC + b"ghij",
        b"last",
    ]
    assert records[1].framed == multi


def test_recordio_last_padding_may_be_missing():
    assert [r.bare for r in split_records(_part(0, b"abcde")[:-3], "RecordIO")] == [b"abcde"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack("<II", 0x3ED7230A, 0), "bad magic 0x3ED7230A"),
        (_part(3, b"x"), "unexpected cflag 3"),
        (_part(1, b"x"), "without its end"),
        (_part(1, b"x") + _part(0, b"y"), "unexpected cflag 0"),
        (_part(0, b"abcdef")[:-6], "truncated data"),
        (_part(0, b"ab")[:-1] + b"\x01", "non-zero padding"),
        (MAGIC, "truncated header"),
    ],
)
def test_recordio_corruption_is_detected(data, message):
    with pytest.raises(FramingError, match=message):
        split_records(data, "RecordIO")


def test_frame_recordio_refuses_aligned_magic():
    with pytest.raises(ValueError, match="magic"):
        frame_recordio(b"1234" + MAGIC)


def test_unknown_split_type():
    with pytest.raises(ValueError, match="unknown split type"):
        split_records(b"x", "Lines")
