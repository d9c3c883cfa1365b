"""RestClient (and the metadata ModelServerClient caches over its GETs) against a real model
server, and a tiny loopback HTTP server for what a model server seldom does (slow, huge,
cut-off answers; closed keep-alive connections)."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import requests

from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.tfs_client.errors import (
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)
from sagemaker_serving.tfs_client.rest import RestClient

BIG = b"7" * (32 << 20)


@pytest.fixture
def call() -> Iterator[Callable[..., requests.Response]]:
    """`call(client, method, uri, body, deadline)`: RestClient.arequest on one event loop for
    the whole test (so kept-alive connections carry over)."""
    loop = asyncio.new_event_loop()
    yield lambda client, *args: loop.run_until_complete(client.arequest(*args))
    loop.close()


def deadline(seconds: float = 10.0) -> float:
    return time.monotonic() + seconds


# ----- the real model server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def rest(tfs_server) -> RestClient:
    return RestClient([tfs_server.rest_port])


def test_an_answer_is_a_requests_response(rest, call):
    uri = rest.uri(0, "/v1/models/half_plus_two:predict")
    reply = call(rest, "POST", uri, '{"instances": [1.0, 2.0, 5.0]}', deadline())
    assert isinstance(reply, requests.Response)
    assert reply.status_code == 200 and reply.ok and reply.reason == "OK"
    assert reply.json() == {"predictions": [2.5, 3.0, 4.5]}
    assert reply.text == reply.content.decode() and reply.encoding
    assert reply.headers["content-type"] == "application/json"
    assert reply.url == uri and reply.request.method == "POST"


def test_an_error_answer_keeps_tf_servings_status_and_text(rest, call):
    uri = rest.uri(0, "/v1/models/half_plus_two:predict")
    reply = call(rest, "POST", uri, b'{"instances": ["x"]}', deadline())
    assert reply.status_code == 400
    assert "not of expected type" in reply.json()["error"]


def test_version_states_of_every_version_and_none_for_an_unknown_model(rest):
    states = rest.version_states(0, "half_plus_three", deadline())
    assert states == {123: "AVAILABLE", 124: "AVAILABLE"}
    assert rest.version_states(0, "no_such_model", deadline()) == {}


def test_metadata_is_per_version(tfs_server):
    client = ModelServerClient([tfs_server.rest_port], [tfs_server.grpc_port])
    latest = client.metadata("half_plus_three", None, deadline())
    older = client.metadata("half_plus_three", "123", deadline())
    assert latest["model_spec"]["version"] == "124"
    assert older["model_spec"]["version"] == "123"
    with pytest.raises(ModelServerError) as info:
        client.metadata("half_plus_three", "7", deadline())
    assert info.value.status == 404 and "half_plus_three" in info.value.message


def test_a_port_nobody_listens_on_is_503():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        client = RestClient([port])
        with pytest.raises(ModelServerUnavailable) as info:
            client.get(0, "/v1/models/m", deadline())
    assert info.value.status == 503
    # the reason (refused, at which address) is logged, not told to the client
    assert info.value.message == "The model server is unavailable"


def refusing_port() -> Iterator[int]:
    """A port that refuses connections (bound, not listening) for the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_an_instance_that_refuses_passes_an_asynchronous_request_to_the_next(loopback):
    """A model server instance down (restarting) costs a request nothing: nothing was sent."""
    for refused in refusing_port():
        client = RestClient([refused, loopback.port])
        loop = asyncio.new_event_loop()
        try:
            reply = loop.run_until_complete(
                client.arequest("POST", client.uri(0, "/ok"), b"{}", deadline())
            )
        finally:
            loop.close()
        assert reply.json() == {"a": 1} and loopback.requests == ["/ok"]
        # a question to one instance (its health, its models) is that instance's alone
        with pytest.raises(ModelServerUnavailable):
            client.get(0, "/ok", deadline())
        assert loopback.requests == ["/ok"]


def test_a_deadline_already_past_is_504_without_asking(rest):
    with pytest.raises(ModelServerTimeout) as info:
        rest.get(0, "/v1/models/m", time.monotonic() - 1)
    assert info.value.status == 504 and "deadline passed" in info.value.message


# ----- a tiny loopback server --------------------------------------------------------------

Route = Callable[[http.server.BaseHTTPRequestHandler], None]


class Loopback:
    """A threading HTTP/1.1 server: `routes` by path; it counts requests and connections."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.requests: list[str] = []
        self.connections: set[int] = set()
        self.release = threading.Event()  # what slow answers wait for
        loopback = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()  # headers and body go out at once, as from a model server
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def handle_one_request(self) -> None:
                loopback.connections.add(self.client_address[1])
                super().handle_one_request()

            def do_GET(self) -> None:
                loopback.requests.append(self.path)
                loopback.routes[self.path.split("?")[0]](self)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> Loopback:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def answer(body: bytes, status: int = 200, close: bool = False) -> Route:
    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        handler.rfile.read(length)
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.close_connection = close  # closed without saying so (no Connection: close)

    return route


def chunked(body: bytes, size: int) -> Route:
    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for start in range(0, len(body), size):
            part = body[start : start + size]
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        handler.wfile.write(b"0\r\n\r\n")

    return route


def slow(loopback: Loopback) -> Route:
    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        loopback.release.wait(30)

    return route


def trickle(loopback: Loopback) -> Route:
    """Headers at once, then a byte every 0.1 s for up to 30 s."""

    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "300")
        handler.end_headers()
        for _ in range(300):
            if loopback.release.wait(0.1):
                return
            handler.wfile.write(b"x")
            handler.wfile.flush()

    return route


def hang_up(handler: http.server.BaseHTTPRequestHandler) -> None:
    handler.close_connection = True  # reads the request, answers nothing


def cut_short(handler: http.server.BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b"x" * 10)
    handler.close_connection = True


METADATA = json.dumps({"model_spec": {"name": "m"}, "metadata": {}}).encode()


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    with Loopback({}) as server:
        server.routes.update(
            {
                "/ok": answer(b'{"a": 1}'),
                "/big": answer(BIG),
                "/big-chunked": chunked(BIG, 1 << 20),
                "/closing": answer(b"{}", close=True),
                "/slow": slow(server),
                "/trickle": trickle(server),
                "/hang-up": hang_up,
                "/cut-short": cut_short,
                "/v1/models/m/metadata": answer(METADATA),
                "/v1/models/m/versions/2/metadata": answer(METADATA),
                "/v1/models/gone/metadata": answer(b'{"error": "Servable not found"}', 404),
                "/v1/models/text/metadata": answer(b"plain words", 500),
            }
        )
        yield server


def test_requests_reuse_one_kept_alive_connection(loopback, call):
    client = RestClient([loopback.port])
    for _ in range(20):
        assert call(client, "GET", client.uri(0, "/ok"), None, deadline()).json() == {"a": 1}
    assert len(loopback.connections) == 1


def test_a_connection_the_server_closed_is_replaced(loopback, call):
    client = RestClient([loopback.port])
    for _ in range(5):
        reply = call(client, "POST", client.uri(0, "/closing"), b"{}", deadline())
        assert reply.status_code == 200
    assert len(loopback.connections) == 5


@pytest.mark.parametrize("path", ["/big", "/big-chunked"])
def test_a_32_mib_answer_is_read_whole_and_fast(loopback, path, call):
    client = RestClient([loopback.port])
    started = time.monotonic()
    reply = call(client, "GET", client.uri(0, path), None, deadline(30))
    elapsed = time.monotonic() - started
    assert reply.content == BIG
    assert elapsed < 0.6, f"{elapsed:.2f}s for 32 MiB"  # a buffer grown by += took 0.93 s


def test_an_answer_past_the_deadline_is_504(loopback, call):
    client = RestClient([loopback.port])
    with pytest.raises(ModelServerTimeout) as info:
        call(client, "GET", client.uri(0, "/slow"), None, deadline(0.3))
    assert info.value.status == 504
    assert info.value.message == "The model server did not answer before the request deadline"


@pytest.mark.parametrize("path", ["/hang-up", "/cut-short"])
def test_a_connection_closed_before_the_whole_answer_is_503(loopback, path, call):
    client = RestClient([loopback.port])
    with pytest.raises(ModelServerUnavailable) as info:
        call(client, "GET", client.uri(0, path), None, deadline())
    assert info.value.status == 503


def test_metadata_is_cached_per_model_and_version_until_forgotten(loopback):
    client = ModelServerClient([loopback.port], [0])
    asked = lambda: [p for p in loopback.requests if p.endswith("/metadata")]  # noqa: E731
    for _ in range(3):
        assert client.metadata("m", None, deadline())["model_spec"]["name"] == "m"
        client.metadata("m", "2", deadline())
    assert asked() == ["/v1/models/m/metadata", "/v1/models/m/versions/2/metadata"]
    client.forget("m")
    client.metadata("m", "2", deadline())
    client.forget("other")
    client.metadata("m", "2", deadline())
    assert len(asked()) == 3
    client.clear()
    client.metadata("m", None, deadline())
    assert len(asked()) == 4


def test_metadata_errors_carry_tf_servings_status_and_text(loopback):
    client = ModelServerClient([loopback.port], [0])
    with pytest.raises(ModelServerError) as info:
        client.metadata("gone", None, deadline())
    assert (info.value.status, info.value.message) == (404, "Servable not found")
    with pytest.raises(ModelServerError) as info:
        client.metadata("text", None, deadline())
    assert (info.value.status, info.value.message) == (500, "plain words")
    client.metadata("m", None, deadline())
    with pytest.raises(ModelServerError):
        client.metadata("gone", None, deadline())  # errors are not cached
    assert loopback.requests.count("/v1/models/gone/metadata") == 2


def test_more_requests_at_once_than_the_pool_keeps_all_succeed_quietly(loopback, caplog):
    together = threading.Barrier(6, timeout=10)

    def meet(handler: http.server.BaseHTTPRequestHandler) -> None:
        together.wait()  # six requests on six connections at the same time
        answer(b"{}")(handler)

    loopback.routes["/meet"] = meet
    client = RestClient([loopback.port], pool_size=2)

    async def run() -> list[requests.Response]:
        meeting = [
            client.arequest("GET", client.uri(0, "/meet"), None, deadline()) for _ in range(6)
        ]
        replies = await asyncio.gather(*meeting)
        for _ in range(4):  # the two kept connections serve what follows
            await client.arequest("GET", client.uri(0, "/ok"), None, deadline())
        return replies

    assert [reply.status_code for reply in asyncio.run(run())] == [200] * 6
    assert len(loopback.connections) == 6
    assert "pool is full" not in caplog.text


def test_an_error_that_echoes_invalid_utf8_is_read_once():
    """TF Serving's error text is taken out of its JSON even when it echoes a client's
    invalid bytes (it was wrapped twice: {"error": "{\\n \\"error\\": ...}"})."""
    from sagemaker_serving.tfs_client.rest import error_text

    body = b'{\n    "error": "JSON Value: \\"\xff\\" Type: String"\n}'
    assert error_text(body) == 'JSON Value: "\ufffd" Type: String'


# ----- a caller on a thread (get) ----------------------------------------------------------


def test_get_answers_status_and_body(loopback):
    client = RestClient([loopback.port])
    assert client.get(0, "/ok", deadline()) == (200, b'{"a": 1}')
    assert client.get(0, "/v1/models/gone/metadata", deadline())[0] == 404


def test_a_get_past_the_deadline_is_504(loopback):
    client = RestClient([loopback.port])
    with pytest.raises(ModelServerTimeout) as info:
        client.get(0, "/slow", deadline(0.3))
    assert info.value.message == "The model server did not answer before the request deadline"


def test_a_get_answered_a_byte_at_a_time_ends_at_its_deadline(loopback):
    client = RestClient([loopback.port])
    started = time.monotonic()
    with pytest.raises(ModelServerTimeout):
        client.get(0, "/trickle", deadline(0.5))
    assert time.monotonic() - started < 10  # the answer alone takes 30 s


@pytest.mark.parametrize("path", ["/big", "/big-chunked"])
def test_a_get_reads_large_and_chunked_answers_whole(loopback, path):
    assert RestClient([loopback.port]).get(0, path, deadline()) == (200, BIG)


@pytest.mark.parametrize("path", ["/hang-up", "/cut-short"])
def test_a_get_closed_before_the_whole_answer_is_503(loopback, path):
    client = RestClient([loopback.port])
    with pytest.raises(ModelServerUnavailable) as info:
        client.get(0, path, deadline())
    assert info.value.message == "The model server is unavailable"
