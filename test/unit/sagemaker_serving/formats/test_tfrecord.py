"""sagemaker_serving.formats.tfrecord: TFRecord frames as TensorFlow writes them, and the one
walker the service and the batch runner share (the corruptions are test/support's table)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagemaker_serving.formats.tfrecord import (
    TFRecordError,
    frame_tfrecord,
    masked_crc32c,
    read_tfrecords,
    walk_frames,
)
from tfrecord_cases import CORRUPTIONS, GOOD, Corruption


def test_frame_matches_tensorflow():
    # bytes of tf.io.TFRecordWriter writing b"hello" (TensorFlow 2.21)
    expected = bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19")
    assert frame_tfrecord(b"hello") == expected
    assert masked_crc32c(b"hello") == 0x191C1FBB


def test_frame_matches_tensorflows_writer(tmp_path):
    tf = pytest.importorskip("tensorflow")
    records = [b"\x0a\x00", b"", b"\x00" * 300]
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        assert f.read() == b"".join(map(frame_tfrecord, records))


def test_frame_layout():
    framed = frame_tfrecord(b"hello")
    assert struct.unpack("<Q", framed[:8]) == (5,)
    assert framed[12:17] == b"hello" and len(framed) == 21


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_read_round_trip(records):
    data = b"".join(frame_tfrecord(r) for r in records)
    frames = list(read_tfrecords(data))
    assert [data[f.start : f.end] for f in frames] == records
    assert [data[f.offset : f.stop] for f in frames] == [frame_tfrecord(r) for r in records]
    assert [f.index for f in frames] == list(range(len(records)))


def test_no_bytes_no_frames():
    assert list(walk_frames(b"")) == []


@pytest.mark.parametrize("case", CORRUPTIONS, ids=lambda case: case.name)
def test_the_error_names_the_frame_its_offset_and_the_reason(case: Corruption):
    with pytest.raises(TFRecordError) as info:
        list(read_tfrecords(case.data))
    err = info.value
    assert (err.index, err.offset, err.reason) == (case.index, case.offset, case.reason)
    assert str(err) == f"TFRecord {case.index} at byte {case.offset}: {case.reason}"


@pytest.mark.parametrize("case", CORRUPTIONS, ids=lambda case: case.name)
def test_walking_checks_the_framing_and_check_the_data(case: Corruption):
    if not case.in_data:
        with pytest.raises(TFRecordError) as info:
            list(walk_frames(case.data))
        assert info.value.reason == case.reason
        return
    frames = list(walk_frames(case.data))  # the frames walk to the end
    assert frames[-1].stop == len(case.data)
    frames[0].check(case.data)
    with pytest.raises(TFRecordError, match="data CRC mismatch"):
        frames[case.index].check(case.data)


def test_frames_stop_at_the_first_error():
    frames = walk_frames(GOOD + b"\x00")
    assert next(frames).index == 0 and next(frames).index == 1
    with pytest.raises(TFRecordError, match="TFRecord 2 at byte 42: truncated header"):
        next(frames)
