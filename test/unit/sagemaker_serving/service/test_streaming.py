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


class HandlersOwnBaseException(BaseException):
    """What a library may raise: no Exception."""


def test_a_base_exception_in_mid_stream_ends_with_its_error_event():
    import asyncio
    import json

    from sagemaker_serving.service.placement import Placement
    from sagemaker_serving.service.streaming import _sent

    def chunks():
        yield b"first"
        raise HandlersOwnBaseException("the handler's own words")

    async def collect() -> list[bytes]:
        placement = Placement("uvicorn", 1)
        try:
            return [part async for part in _sent(chunks(), placement, True, "id-1", None, None)]
        finally:
            placement.close()

    first, last = asyncio.run(collect())
    assert first == b"data: first\n\n"
    name, data = last.decode().splitlines()[:2]
    assert name == "event: error"
    assert json.loads(data.removeprefix("data: "))["error"].endswith("the handler's own words")
