"""tfs_batch_transform.framing: SplitType None, Line, TFRecord (the shared walker; a bad frame
named with its offset) and MXNet RecordIO (multi-part records)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemaker_serving.formats.tfrecord import frame_tfrecord
from tfrecord_cases import CORRUPTIONS, Corruption
from tfs_batch_transform.framing import (
    RECORDIO_MAGIC,
    FramingError,
    frame_recordio,
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


@given(payloads)
def test_tfrecord_keeps_each_frame_and_its_record(items):
    data = b"".join(frame_tfrecord(p) for p in items)
    records = split_records(data, "TFRecord")
    assert [r.bare for r in records] == items
    assert [r.framed for r in records] == [frame_tfrecord(p) for p in items]


@pytest.mark.parametrize("case", CORRUPTIONS, ids=lambda case: case.name)
def test_a_bad_tfrecord_frame_names_the_record_and_its_offset(case: Corruption):
    message = f"TFRecord {case.index} at byte {case.offset}: {case.reason}"
    with pytest.raises(FramingError) as info:
        split_records(case.data, "TFRecord")
    assert str(info.value) == message


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
