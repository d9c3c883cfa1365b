"""api.rest_api: TF Serving's REST API, its ASGI app driven in this process over a real data
plane (half_plus_two: y = 0.5x + 2; half_plus_three: y = 0.5x + 3, versions 123 and 124)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterator

import pytest

from tfs_model_server.api.rest_api import RestApi
from tfs_model_server.core.dataplane import DataPlane


@pytest.fixture(scope="module")
def app(plane: DataPlane) -> Iterator[RestApi]:
    api = RestApi(plane, num_threads=2, timeout_ms=30000, metrics_path="/metrics")
    yield api
    api.close()


def call(
    app: RestApi, method: str, path: str, body: bytes | str = b"", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request through the ASGI app: (status, headers, body)."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    data = body.encode() if isinstance(body, str) else body
    incoming = [{"type": "http.request", "body": data[:3], "more_body": True}]
    incoming.append({"type": "http.request", "body": data[3:], "more_body": False})
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start, content = sent
    reply_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    assert int(reply_headers["content-length"]) == len(content["body"])
    return start["status"], reply_headers, content["body"]


def doc(app: RestApi, method: str, path: str, body: object = b"", **headers: str):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    status, _, content = call(app, method, path, data, **headers)
    return status, json.loads(content)


def test_predict_row_and_columnar(app: RestApi) -> None:
    path = "/v1/models/half_plus_two:predict"
    assert doc(app, "POST", path, {"instances": [1.0, 2.0]}) == (200, {"predictions": [2.5, 3.0]})
    assert doc(app, "POST", path, {"inputs": [1.0]}) == (200, {"outputs": [2.5]})


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models/half_plus_three/versions/123:predict",
        "/v1/models/half_plus_three/labels/stable:predict",
        "/v1/models/half_plus_%74hree:predict",
    ],
)
def test_predict_addresses_versions_labels_and_escaped_names(app: RestApi, path: str) -> None:
    assert doc(app, "POST", path, {"instances": [2.0]}) == (200, {"predictions": [4.0]})


def test_classify_and_regress(app: RestApi) -> None:
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}, {"x": 4.0}]}
    status, reply = doc(app, "POST", "/v1/models/half_plus_two:classify", body)
    assert (status, reply) == (200, {"results": [[["", 3.0]], [["", 4.0]]]})
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}
    assert doc(app, "POST", "/v1/models/half_plus_two:regress", body) == (200, {"results": [3.0]})


def test_status_and_metadata(app: RestApi) -> None:
    status, reply = doc(app, "GET", "/v1/models/half_plus_three/versions/124")
    assert (status, reply["model_version_status"][0]["state"]) == (200, "AVAILABLE")
    status, reply = doc(app, "GET", "/v1/models/half_plus_two/metadata")
    assert status == 200
    assert reply["model_spec"] == {"name": "half_plus_two", "signature_name": "", "version": "123"}
    assert "classify_x_to_y" in reply["metadata"]["signature_def"]["signature_def"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("GET", "/elsewhere", b"", 404, "Not Found"),
        ("GET", "/v1/models/half_plus_two:predict", b"", 400, "Malformed request: GET "),
        ("GET", "/v1/models", b"", 400, "Missing model name in request."),
        ("POST", "/v1/models/nope:predict", b"{}", 404, "Servable not found for request"),
        (
            "POST",
            "/v1/models/half_plus_two/versions/99999999999999999999:predict",
            b"{}",
            400,
            "Failed to convert version: 99999999999999999999 to numeric.",
        ),
        (
            "POST",
            "/v1/models/half_plus_two:predict",
            b"{",
            400,
            "JSON Parse error: Missing a name for object member. at offset: 1",
        ),
        (
            "POST",
            "/v1/models/half_plus_two:predict",
            b'{"signature_name": "nope", "instances": [1.0]}',
            400,
            'Serving signature name: "nope" not found in signature def',
        ),
    ],
)
def test_errors(app: RestApi, method, path, body, status, error) -> None:
    got, reply = doc(app, method, path, body)
    assert got == status
    assert reply["error"].startswith(error)


def test_gzip_request_bodies(app: RestApi) -> None:
    body = gzip.compress(json.dumps({"instances": [2.0]}).encode())
    path = "/v1/models/half_plus_two:predict"
    assert doc(app, "POST", path, body, content_encoding="gzip") == (200, {"predictions": [3.0]})
    status, reply = doc(app, "POST", path, b"not gzip", content_encoding="gzip")
    assert status == 400
    assert reply["error"].startswith("Failed to decompress the gzip request body")


def test_cors_preflight_and_headers(plane: DataPlane) -> None:
    cors = RestApi(plane, num_threads=1, timeout_ms=0, enable_cors=True)
    try:
        status, headers, body = call(cors, "OPTIONS", "/v1/models/x", origin="http://a.example")
        assert (status, body, headers["access-control-allow-origin"]) == (200, b"", "*")
        status, _, _ = call(cors, "OPTIONS", "/v1/models/x")
        assert status == 400
    finally:
        cors.close()


def test_metrics_path(app: RestApi) -> None:
    doc(app, "POST", "/v1/models/half_plus_two:predict", {"instances": [1.0]})
    status, headers, body = call(app, "GET", "/metrics")
    assert (status, headers["content-type"]) == (200, "text/plain")
    assert ':tensorflow:serving:request_count{model_name="half_plus_two",status="OK"}' in (
        body.decode()
    )
