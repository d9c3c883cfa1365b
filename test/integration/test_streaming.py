"""Streamed answers (docs/hosting-modes.md, service/streaming.py): a handler's generator sent
chunk by chunk through nginx, as server-sent events when asked, an error in mid-stream, a
client that goes away; and a no-code JSON Lines request answered a group of records at a time.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from conftest import serve_stack
from sagemaker_serving.service.pipeline import STREAM_RECORDS
from streaming_code import STREAMER


@dataclass
class Streamer:
    """Where the streaming handler is invoked: its URL's path on the stack."""

    server: Any
    path: str

    @property
    def url(self) -> str:
        return self.server.url + self.path

    @property
    def port(self) -> int:
        return self.server.port

    def log(self) -> str:
        return self.server.log()


@pytest.fixture(scope="module", params=["workers", "handler_processes"])
def streamer(request, tmp_path_factory):
    """The handler in the service's workers (a single-model endpoint), or in handler processes
    of its own (a multi-model model whose code/ brings a module beside inference.py)."""
    import example_models as em

    root = tmp_path_factory.mktemp("streaming")
    em.half_plus_three_tf1(root / "model" / "half_plus_three", versions=(1,))
    (root / "model" / "code").mkdir()
    (root / "model" / "code" / "inference.py").write_text(STREAMER)
    if request.param == "workers":
        with serve_stack(root / "model", root) as server:
            yield Streamer(server, "/invocations")
        return
    (root / "model" / "code" / "helper.py").write_text("VALUE = 1\n")  # its own environment
    (root / "stack").mkdir()
    with serve_stack(root, root / "stack", {"SAGEMAKER_MULTI_MODEL": "true"}) as server:
        reply = requests.post(
            f"{server.url}/models",
            json={"model_name": "streams", "url": str(root / "model")},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        assert "handler processes for " in server.log()  # not the workers
        yield Streamer(server, "/models/streams/invoke")


@pytest.fixture(scope="module")
def no_code(tmp_path_factory):
    import example_models as em

    root = tmp_path_factory.mktemp("streaming_no_code")
    em.half_plus_three_tf1(root / "model" / "half_plus_three", versions=(1,))
    with serve_stack(root / "model", root) as server:
        yield server


def arrivals(reply: requests.Response) -> list[tuple[float, bytes]]:
    """(seconds since the request, piece) for each piece of the answer as it arrived."""
    started = time.monotonic()
    return [(time.monotonic() - started, piece) for piece in reply.iter_content(None)]


def post(url: str, body: bytes | str, content_type: str, accept: str = "*/*", **kwargs):
    """POST to the invocation `url` (a path on the stack's URL)."""
    headers = {"Content-Type": content_type, "Accept": accept}
    return requests.post(url, data=body, headers=headers, timeout=60, **kwargs)


def test_a_generator_s_chunks_arrive_as_they_are_yielded(streamer):
    reply = post(streamer.url, "[5, 0.5]", "application/x-chunks", stream=True)
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "text/plain"
    assert reply.headers["Transfer-Encoding"] == "chunked"
    pieces = arrivals(reply)
    assert b"".join(piece for _, piece in pieces) == b"".join(
        f"chunk {i}\n".encode() for i in range(5)
    )
    first, last = pieces[0][0], pieces[-1][0]
    assert last - first >= 1.5, pieces  # the last chunk came 2 s after the first, not with it


def test_server_sent_events_frame_each_chunk(streamer):
    reply = post(streamer.url, "[3, 0]", "application/x-chunks", "text/event-stream")
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "text/event-stream"
    assert reply.content == b"".join(f"data: chunk {i}\n\n".encode() for i in range(3))
    bare = post(streamer.url, "", "application/x-bare", "text/plain")
    assert (bare.headers["Content-Type"], bare.content) == ("text/plain", b"0\n1\n2\n")
    empty = post(streamer.url, "[0, 0]", "application/x-chunks", "text/event-stream")
    assert (empty.status_code, empty.content) == (200, b"")
    assert empty.headers["Content-Type"] == "text/event-stream"  # no events: still a stream


def test_an_error_in_mid_stream(streamer):
    events = post(streamer.url, "", "application/x-fail-midway", "text/event-stream")
    assert events.status_code == 200
    first, error, end = events.content.split(b"\n\n")
    assert first == b"data: first"
    name, data = error.split(b"\n")
    assert name == b"event: error"
    body = json.loads(data.removeprefix(b"data: "))
    assert body["error"] == "ValueError: broke after the first chunk"
    assert body["request_id"] == events.headers["X-Request-Id"]
    assert end == b""
    plain = post(streamer.url, "", "application/x-fail-midway", "text/plain", stream=True)
    assert plain.status_code == 200
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        plain.content  # noqa: B018 - cut short: no last chunk


def test_a_client_that_goes_away_closes_the_generator(streamer):
    connection = http.client.HTTPConnection("127.0.0.1", streamer.port, timeout=30)
    connection.request(
        "POST", streamer.path, body=b"", headers={"Content-Type": "application/x-endless"}
    )
    reply = connection.getresponse()
    assert reply.status == 200
    assert reply.read(3 * 1025)  # some chunks came
    connection.sock.shutdown(socket.SHUT_RDWR)  # gone, mid-stream
    reply.close()
    connection.close()
    deadline = time.monotonic() + 20
    while "endless generator closed after" not in (log := streamer.log()):
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(0.2)
    closed = int(log.split("endless generator closed after ")[1].split()[0])
    time.sleep(1)  # it would have made 20 more in a second
    assert log.count("endless generator closed after") == streamer.log().count(
        "endless generator closed after"
    )
    assert closed < 400  # stopped within seconds of the disconnect, not at a deadline


def test_a_json_lines_request_streams_its_answer_lines_as_the_model_server_answers(no_code):
    records = 10_000
    body = "".join(f"{i % 7}.0\n" for i in range(records))
    reply = post(
        f"{no_code.url}/invocations",
        body,
        "application/jsonlines",
        "text/event-stream",
        stream=True,
    )
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "text/event-stream"
    pieces = arrivals(reply)
    text = b"".join(piece for _, piece in pieces)
    events = text.split(b"\n\n")
    assert events[-1] == b""
    lines = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert lines == [(i % 7) * 0.5 + 3.0 for i in range(records)]
    first, last = pieces[0][0], pieces[-1][0]
    assert first < last / 4, (first, last)  # the first lines came long before the last
    bad = post(
        f"{no_code.url}/invocations", "1.0\n[oops\n", "application/jsonlines", "text/event-stream"
    )
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("Malformed JSON Lines: line 2")


def test_a_bad_record_in_a_later_group_names_the_records_of_the_request(no_code):
    """The model server numbers the elements of its own request, one group of STREAM_RECORDS:
    the error event says which records of the client's request those are."""
    body = "1.0\n" * (STREAM_RECORDS + 8) + '"text"\n'
    reply = post(f"{no_code.url}/invocations", body, "application/jsonlines", "text/event-stream")
    assert reply.status_code == 200
    error = reply.content.split(b"\n\n")[-2]
    assert error.startswith(b"event: error\ndata: "), reply.content[-500:]
    message = json.loads(error.split(b"\n")[1].removeprefix(b"data: "))["error"]
    first, last = STREAM_RECORDS + 1, STREAM_RECORDS + 9
    where = f"records {first}-{last} of the request (element 0 is record {first}): "
    assert message.startswith(where), message
    assert "element: 8" in message, message


def model_server_requests(server) -> int:
    """Requests the model server has answered (its Prometheus request_count)."""
    (port,) = server.rest_ports
    text = requests.get(f"http://127.0.0.1:{port}/monitoring/prometheus/metrics", timeout=5).text
    return sum(int(float(n)) for n in re.findall(r"request_count\{[^}]*\} (\S+)", text))


def test_a_client_that_leaves_a_json_lines_stream_stops_the_model_server_s_work(no_code):
    records = 100_000
    groups = records // STREAM_RECORDS  # the model server requests the whole answer takes
    body = "".join(f"{i % 7}.0\n" for i in range(records)).encode()
    before = model_server_requests(no_code)
    with socket.create_connection(("127.0.0.1", no_code.port), timeout=30) as client:
        client.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/jsonlines\r\n"
            b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        assert client.recv(4096).startswith(b"HTTP/1.1 200")  # lines are coming
    counts, deadline = [model_server_requests(no_code)], time.monotonic() + 30
    while len(counts) < 5 or counts[-1] != counts[-5]:  # settled for a second
        assert time.monotonic() < deadline, counts
        time.sleep(0.25)
        counts.append(model_server_requests(no_code))
    assert counts[-1] - before < groups / 2, (counts[-1] - before, groups)


def test_a_streamed_answer_past_the_response_size_ends_with_an_error(tmp_path: Path):
    import example_models as em

    em.half_plus_three_tf1(tmp_path / "model" / "half_plus_three", versions=(1,))
    (tmp_path / "model" / "code").mkdir()
    (tmp_path / "model" / "code" / "inference.py").write_text(STREAMER)
    with serve_stack(tmp_path / "model", tmp_path, {"SAGEMAKER_MAX_RESPONSE_SIZE": "20"}) as s:
        reply = post(f"{s.url}/invocations", "[5, 0]", "application/x-chunks", "text/event-stream")
        assert reply.status_code == 200
        events = reply.content.split(b"\n\n")
        assert events[:2] == [b"data: chunk 0", b"data: chunk 1"]
        error = json.loads(events[2].split(b"\n")[1].removeprefix(b"data: "))["error"]
        assert error == "The streamed answer passed SAGEMAKER_MAX_RESPONSE_SIZE (20)"
