"""Streamed answers in the image (docs/hosting-modes.md): a handler's generator chunk by chunk
through the image's nginx, server-sent events, an error in mid-stream, a client that goes away,
and a no-code JSON Lines request of 10,000 records answered as the model server answers."""

from __future__ import annotations

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import requests
from containers import running

from streaming_code import STREAMER


def _post(url: str, body: str, content_type: str, accept: str, **kwargs) -> requests.Response:
    headers = {"Content-Type": content_type, "Accept": accept}
    return requests.post(f"{url}/invocations", data=body, headers=headers, timeout=120, **kwargs)


def _arrivals(reply: requests.Response) -> list[tuple[float, bytes]]:
    started = time.monotonic()
    return [(time.monotonic() - started, piece) for piece in reply.iter_content(None)]


def test_a_handler_s_generator_streams_through_the_image(engine, image, tmp_path):
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    (tmp_path / "model" / "code").mkdir()
    (tmp_path / "model" / "code" / "inference.py").write_text(STREAMER)
    with running(engine, image, tmp_path / "model") as container:
        reply = _post(container.url, "[5, 0.5]", "application/x-chunks", "*/*", stream=True)
        assert (reply.status_code, reply.headers["Transfer-Encoding"]) == (200, "chunked")
        pieces = _arrivals(reply)
        assert b"".join(p for _, p in pieces) == b"".join(b"chunk %d\n" % i for i in range(5))
        assert pieces[-1][0] - pieces[0][0] >= 1.5, pieces  # each chunk as it was yielded

        events = _post(container.url, "[2, 0]", "application/x-chunks", "text/event-stream")
        assert events.headers["Content-Type"] == "text/event-stream"
        assert events.content == b"data: chunk 0\n\ndata: chunk 1\n\n"

        failed = _post(container.url, "", "application/x-fail-midway", "text/event-stream")
        first, error, end = failed.content.split(b"\n\n")
        assert (first, end) == (b"data: first", b"")
        assert error.startswith(b"event: error\ndata: {")
        assert b"broke after the first chunk" in error

        target = urlsplit(container.url)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        connection.request(
            "POST", "/invocations", body=b"", headers={"Content-Type": "application/x-endless"}
        )
        answer = connection.getresponse()
        assert answer.status == 200 and answer.read(3 * 1025)
        connection.sock.shutdown(socket.SHUT_RDWR)  # gone, mid-stream
        answer.close()
        connection.close()
        deadline = time.monotonic() + 30
        while "endless generator closed after" not in container.logs():
            assert time.monotonic() < deadline, container.logs()[-3000:]
            time.sleep(0.5)
        assert container.stop() == 0


def test_a_no_code_json_lines_request_streams_its_lines(engine, image, tmp_path):
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    records = 10_000
    body = "".join(f"{i % 7}.0\n" for i in range(records))
    with running(engine, image, tmp_path / "model") as container:
        reply = _post(
            container.url, body, "application/jsonlines", "text/event-stream", stream=True
        )
        assert reply.status_code == 200
        pieces = _arrivals(reply)
        events = b"".join(p for _, p in pieces).split(b"\n\n")
        assert [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]] == [
            (i % 7) * 0.5 + 3.0 for i in range(records)
        ]
        assert pieces[0][0] < pieces[-1][0] / 4, (pieces[0][0], pieces[-1][0])
