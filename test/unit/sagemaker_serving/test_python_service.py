"""The falcon app of the Python service without a model server: /ping, /metrics, error
bodies, OPTIONS, and what the multi-model API answers before it talks to
a model server (with one: test_invocations.py, multimodel/test_api.py)."""

from __future__ import annotations

import time

import falcon
import falcon.testing
import pytest

from sagemaker_serving.python_service import guarded


@pytest.fixture
def client(make_app) -> falcon.testing.TestClient:
    return make_app()


@pytest.fixture
def mme(make_app) -> falcon.testing.TestClient:
    return make_app(multi_model=True)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/invocations", "POST"), ("/ping", "GET, HEAD"), ("/metrics", "GET, HEAD")],
)
def test_options_is_405_json_with_the_routes_methods(client, path, allowed):
    reply = client.simulate_options(path)
    assert reply.status_code == 405
    assert reply.json["error"]
    assert sorted(reply.headers["Allow"].split(", ")) == sorted(allowed.split(", "))


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/models", "GET, POST"), ("/models/a", "GET, HEAD, DELETE"), ("/models/a/invoke", "POST")],
)
def test_options_on_the_multi_model_api_is_405_json(mme, path, allowed):
    reply = mme.simulate_options(path)
    assert reply.status_code == 405 and reply.json["error"]
    assert sorted(reply.headers["Allow"].split(", ")) == sorted(allowed.split(", "))


def test_other_unsupported_methods_are_405_json_without_options_in_allow(client):
    reply = client.simulate_put("/invocations")
    assert reply.status_code == 405 and reply.json["error"]
    assert reply.headers["Allow"] == "POST"


def test_ping_and_metrics(make_app, tfs_server):
    """/ping: 200 once every model is AVAILABLE on every model server instance (its thread
    asks them), 503 saying why while one is not."""
    down = make_app(models=["half_plus_two"])  # its model server's port refuses
    reply = down.simulate_get("/ping")
    assert reply.status_code == 503 and "AVAILABLE" in reply.json["error"], reply.text
    client = make_app(tfs_server, models=["half_plus_two"])
    deadline = time.monotonic() + 30
    while client.simulate_get("/ping").status_code != 200:
        assert time.monotonic() < deadline, client.simulate_get("/ping").text
        time.sleep(0.1)
    assert client.simulate_head("/ping").status_code == 200
    client.simulate_post("/invocations", body=b"{}")  # its stages timed (nginx counts it)
    reply = client.simulate_get("/metrics")
    assert reply.status_code == 200 and reply.headers["Content-Type"].startswith("text/plain")
    assert 'sagemaker_stage_duration_seconds_count{stage="model_server"}' in reply.text
    assert "sagemaker_requests_total{" not in reply.text  # counted from nginx's lines only


def test_an_unexpected_exception_is_a_json_500(make_app, monkeypatch):
    async def explode(self, req, resp):
        raise KeyError("boom")

    monkeypatch.setattr("sagemaker_serving.python_service.Ping.on_get", explode)
    client = make_app()
    reply = client.simulate_get("/ping")
    assert reply.status_code == 500
    assert "KeyError" in reply.json["error"]


def test_an_unknown_route_is_404_json(client):
    reply = client.simulate_get("/nope")
    assert reply.status_code == 404 and reply.json["error"]


def test_deeply_nested_json_on_a_load_is_400(mme):
    reply = mme.simulate_post("/models", body=b"[" * 100_000 + b"]" * 100_000)
    assert reply.status_code == 400, reply.text
    assert "not valid JSON" in reply.json["error"]


def test_a_load_url_over_255_characters_is_400_json(mme):
    reply = mme.simulate_post("/models", json={"model_name": "m", "url": "x" * 300})
    assert reply.status_code == 400, reply.text
    assert "not a usable path" in reply.json["error"]


async def _lifespan(receive, send) -> None:
    """What an ASGI app answers to the lifespan events falcon's test client sends."""
    while True:
        event = (await receive())["type"]
        if event in ("lifespan.startup", "lifespan.shutdown"):
            await send({"type": event + ".complete"})
        if event == "lifespan.shutdown":
            return


def test_what_escapes_the_app_before_an_answer_is_a_json_500():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        raise RuntimeError("escaped")

    client = falcon.testing.TestClient(guarded(app))
    reply = client.simulate_get("/ping", headers={"X-Request-Id": "r-9"})
    assert reply.status_code == 500
    assert reply.json == {"error": "Internal Server Error", "request_id": "r-9"}
    assert reply.headers["Content-Type"] == "application/json"


def test_a_workers_first_ping_finds_the_model_servers_already_asked(make_app):
    """A multi-model worker asks the model servers from the moment it makes its app: its
    first /ping, however late a busy model server answers (1.5 s here, a load in progress),
    reads the answer instead of waiting for it (it waited 1 s, then answered 503)."""
    import http.server
    import threading
    import time
    from types import SimpleNamespace

    answered = threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(1.5)
            body = b'{"model_version_status": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            answered.set()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = make_app(SimpleNamespace(rest_port=server.server_address[1], grpc_port=1),
                          multi_model=True)  # fmt: skip
        assert answered.wait(30), "the worker did not ask the model server before its /ping"
        assert client.simulate_get("/ping").status_code == 200
    finally:
        server.shutdown()
        server.server_close()
