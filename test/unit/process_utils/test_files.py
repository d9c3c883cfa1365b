"""process_utils.files: a file replaced whole, and a file lock that gives up at a deadline."""

from __future__ import annotations

import time

import pytest

from process_utils.files import locked, replace_text


class Busy(Exception):
    pass


def test_replace_text_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "doc.json"
    replace_text(target, "one")
    replace_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_a_held_lock_is_busy_past_the_deadline(tmp_path):
    path = tmp_path / "lock"
    with locked(path, time.monotonic(), Busy()):
        started = time.monotonic()
        # another open file description: another holder
        with pytest.raises(Busy), locked(path, started + 0.1, Busy()):
            pass
        assert time.monotonic() - started >= 0.1
    with locked(path, time.monotonic(), Busy()):  # released: taken at once
        pass
