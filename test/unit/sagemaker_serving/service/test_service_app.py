"""The falcon app of the Python service without servers: error bodies, OPTIONS, the run's
secret, and what the multi-model API answers before it talks to a model server."""

from __future__ import annotations

import socket

import falcon
import falcon.testing
import orjson
import pytest

from sagemaker_serving.service import main as service_main
from sagemaker_serving.service.app import TOKEN_HEADER, ServiceConfig, create_app, guarded

TOKEN = "s3cret-token"


def config(tmp_path, multi_model: bool = False) -> ServiceConfig:
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "models").mkdir(exist_ok=True)
    return ServiceConfig(
        code_dir=str(tmp_path / "code"),
        default_model="m",
        rest_ports=[1],
        grpc_ports=[2],
        request_timeout_seconds=5,
        multi_model=multi_model,
        model_root=str(tmp_path / "models"),
        state_dir=str(tmp_path / "state"),
        load_timeout_seconds=5,
    )


@pytest.fixture
def client(tmp_path) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(config(tmp_path)))


@pytest.fixture
def mme(tmp_path) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(config(tmp_path, multi_model=True)))


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


def test_an_unexpected_exception_is_a_json_500(tmp_path, monkeypatch):
    def explode(self, req, resp):
        raise KeyError("boom")

    monkeypatch.setattr("sagemaker_serving.service.app.Ping.on_get", explode)
    client = falcon.testing.TestClient(create_app(config(tmp_path)))
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


def test_requests_without_the_runs_secret_are_403_and_handlers_never_see_it(tmp_path):
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    client = falcon.testing.TestClient(guarded(app, TOKEN))
    for headers in ({}, {TOKEN_HEADER: "wrong"}, {TOKEN_HEADER: TOKEN + "x"}, {TOKEN_HEADER: "é"}):
        reply = client.simulate_get("/ping", headers=headers)
        assert reply.status_code == 403 and "Forbidden" in reply.json["error"]
    assert not seen
    reply = client.simulate_get("/ping", headers={TOKEN_HEADER: TOKEN, "X-Other": "1"})
    assert reply.status_code == 200
    assert "HTTP_X_OTHER" in seen
    assert not any("TOKEN" in key for key in seen)


def test_gunicorn_error_pages_are_json():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        service_main.write_json_error(ours, 431, "Request Header Fields Too Large", "too many")
        reply = theirs.recv(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"Content-Type: application/json" in head
    assert b"Content-Length: %d" % len(body) in head
    assert orjson.loads(body) == {"error": "Request Header Fields Too Large: too many"}


def test_json_errors_replaces_gunicorns_writer_for_every_worker_class(monkeypatch):
    from gunicorn import util
    from gunicorn.workers import base

    monkeypatch.setattr(util, "write_error", util.write_error)
    service_main.json_errors()
    assert base.util.write_error is service_main.write_json_error
