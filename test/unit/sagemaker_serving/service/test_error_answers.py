"""sagemaker_serving.service.error_answers: whatever a falcon route raises is answered with
its status and the one JSON body (falcon's own errors keep their headers)."""

from __future__ import annotations

import falcon
import falcon.asgi
import falcon.testing
import pytest

from sagemaker_serving import HandlerError
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.service.error_answers import add_error_answers
from sagemaker_serving.user_code.contract import HandlerResultError

RAISED = {
    "status": StatusError("Not ready: starting", 503),
    "payload": PayloadError("Malformed JSON", 400),
    "handler": HandlerError("refused", 422),
    "handler-200": HandlerError("not really ok", 200),
    "contract": HandlerResultError("input_handler returned int 42"),
    "falcon": falcon.HTTPMethodNotAllowed(["GET", "OPTIONS"]),
    "unexpected": KeyError("k"),
}


class Raises:
    async def on_get(self, req, resp, kind: str) -> None:
        raise RAISED[kind]


@pytest.fixture
def client() -> falcon.testing.TestClient:
    app = falcon.asgi.App()
    app.add_route("/raise/{kind}", Raises())
    add_error_answers(app)
    return falcon.testing.TestClient(app)


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [
        ("status", 503, "Not ready: starting"),
        ("payload", 400, "Malformed JSON"),
        ("handler", 422, "refused"),
        ("handler-200", 500, "not really ok"),
        ("contract", 500, "input_handler returned int 42"),
        ("falcon", 405, "Method Not Allowed"),  # as nginx words it, not the status line
        ("unexpected", 500, "KeyError: 'k'"),
    ],
)
def test_each_error_is_its_status_and_the_one_body(client, kind, status, message):
    reply = client.simulate_get(f"/raise/{kind}", headers={"X-Request-Id": "r-7"})
    assert reply.status_code == status
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.json == {"error": message, "request_id": "r-7"}


def test_falcons_errors_keep_their_headers_without_options(client):
    reply = client.simulate_get("/raise/falcon")
    assert reply.headers["Allow"] == "GET"
    assert reply.json["request_id"] == ""
