"""sagemaker_serving.errors: the hierarchy (HandlerError and the layers' errors are
StatusErrors carrying their status) and the one JSON error body."""

from __future__ import annotations

import orjson
import pytest

from sagemaker_serving import HandlerError
from sagemaker_serving.errors import (
    MAX_MESSAGE_CHARS,
    StatusError,
    brief,
    error_body,
    hide_paths,
    public_text,
)
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.tfs_client.errors import ModelServerError, ModelServerTimeout
from sagemaker_serving.user_code.contract import HandlerResultError


def test_every_layers_error_is_a_status_error_taking_message_then_status():
    for kind in (StatusError, PayloadError, MultiModelError, ModelServerError, HandlerError):
        err = kind("what was wrong", 415)
        assert isinstance(err, StatusError), kind
        assert (err.message, err.status, str(err)) == ("what was wrong", 415, "what was wrong")
    assert ModelServerTimeout("late").status == 504
    assert HandlerResultError("returned 42").status == 500


def test_handler_error_keeps_its_public_constructor():
    assert HandlerError("no").status == 400  # the default, as users know it
    assert HandlerError("teapot", status=418).status == 418
    assert isinstance(HandlerError("x"), Exception)


@pytest.mark.parametrize(("status", "answered"), [(400, 400), (599, 599), (200, 500), (999, 500)])
def test_a_status_outside_the_error_range_is_answered_500(status, answered):
    assert HandlerError("x", status).http_status == answered


def test_a_handler_error_takes_what_a_handler_may_well_pass():
    # a status as digits and a dict as message were a 500 "TypeError: '<=' not supported
    # between instances of 'int' and 'str'" / "expected string or bytes-like object"
    assert HandlerError("x", "422").http_status == 422
    assert HandlerError("x", "teapot").http_status == 500
    err = HandlerError({"field": "age", "problem": "négatif"}, 422)
    assert (err.message, err.http_status) == ('{"field": "age", "problem": "négatif"}', 422)
    assert orjson.loads(error_body(err.message, "r"))["error"] == err.message
    assert HandlerError(None).message == "None" and HandlerError({1, 2}).message == "{1, 2}"
    assert HandlerError([b"x"]).message == "[b'x']"


def test_a_message_with_a_lone_surrogate_keeps_its_words():
    # bytes decoded with surrogateescape in a handler's message: orjson refused it, and the
    # answer was "TypeError: str is not valid UTF-8" instead of the message
    body = orjson.loads(error_body("bad byte \udcff in 'é'", "r"))
    assert body["error"] == "bad byte \\udcff in 'é'"


def test_the_one_body_has_the_message_and_the_request_id():
    assert orjson.loads(error_body("bad", "r-1")) == {"error": "bad", "request_id": "r-1"}
    assert error_body("bad", "r-1").endswith(b"}\n")
    long = orjson.loads(error_body("x" * (MAX_MESSAGE_CHARS + 10), ""))["error"]
    assert long == "x" * MAX_MESSAGE_CHARS + "..."
    assert brief("abcdef", 3) == "abc..." and brief("abc", 3) == "abc"


@pytest.fixture
def hidden():
    """The folders a service process hides, as python_service.internal_paths names them."""
    hide_paths({"/srv/run": "<run dir>", "/opt/ml/models": ""})
    yield
    hide_paths({})


@pytest.mark.parametrize(
    ("message", "public"),
    [
        (
            "400 Client Error: Bad Request for url: http://127.0.0.1:8501/v1/models/m:predict",
            "400 Client Error: Bad Request for url: the model server",
        ),
        (
            "failed to connect to ipv4:127.0.0.1:9000, localhost:8500",
            "failed to connect to ipv4:the model server, the model server",
        ),
        ("GET http://LOCALHOST:8501/v1/models/m (timeout)", "GET the model server (timeout)"),
        (
            "see https://example.com:8443/x and 10.1.2.3:80",
            "see https://example.com:8443/x and 10.1.2.3:80",
        ),
        ("No such file: '/opt/ml/models/a/code/x.json'", "No such file: 'a/code/x.json'"),
        ("/opt/ml/models is empty", ". is empty"),
        ("/opt/ml/models2/a and /opt/ml/modelsx", "/opt/ml/models2/a and /opt/ml/modelsx"),
        (
            "pip: '/srv/run/environment/venv/lib/site-packages/x.py'",
            "pip: '<run dir>/environment/venv/lib/site-packages/x.py'",
        ),
    ],
)
def test_no_answer_names_an_internal_address_or_path(hidden, message, public):
    assert public_text(message) == public
    assert orjson.loads(error_body(message, "r"))["error"] == public


def test_what_the_client_sent_is_kept_as_sent(hidden):
    """The AWS container's text for a load of a missing url, with the url as sent."""
    url = "/opt/ml/models/non-existing"
    message = f"Could not find valid base path {url} for servable non-existing"
    assert public_text(message, [url, "non-existing"]) == message
    error = StatusError(f"{message}; at /opt/ml/models/other", 404, [url])
    body = orjson.loads(error_body(error.message, "r", error.quoted))["error"]
    assert body == f"{message}; at other"
