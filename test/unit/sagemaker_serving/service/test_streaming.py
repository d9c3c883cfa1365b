"""Server-sent events' framing and when the client asks for them (service/streaming.py; the
stream itself through nginx: test/integration/test_streaming.py)."""

from __future__ import annotations

import pytest

from sagemaker_serving.service.streaming import event, wants_events


@pytest.mark.parametrize(
    ("data", "name", "framed"),
    [
        (b"chunk\n", None, b"data: chunk\n\n"),
        (b"two\nlines", None, b"data: two\ndata: lines\n\n"),
        (b"", None, b"data: \n\n"),
        (b'{"error": "x"}', "error", b'event: error\ndata: {"error": "x"}\n\n'),
        (b"\xff", None, "data: \ufffd\n\n".encode()),  # not UTF-8: replaced, never a 500
    ],
)
def test_each_chunk_is_one_event(data, name, framed):
    assert event(data, name) == framed


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("text/event-stream", True),
        ("application/json, Text/Event-Stream; q=0.5", True),
        ("text/event-streams", False),
        ("*/*", False),
        (None, False),
    ],
)
def test_events_when_accept_names_them(accept, wanted):
    assert wants_events(accept) is wanted
