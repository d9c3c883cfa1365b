"""sagemaker_serving.errors: the hierarchy (HandlerError and the layers' errors are
StatusErrors carrying their status) and the one JSON error body."""

from __future__ import annotations

import orjson
import pytest

from sagemaker_serving import HandlerError
from sagemaker_serving.errors import MAX_MESSAGE_CHARS, StatusError, brief, error_body
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


def test_the_one_body_has_the_message_and_the_request_id():
    assert orjson.loads(error_body("bad", "r-1")) == {"error": "bad", "request_id": "r-1"}
    assert error_body("bad", "r-1").endswith(b"}\n")
    long = orjson.loads(error_body("x" * (MAX_MESSAGE_CHARS + 10), ""))["error"]
    assert long == "x" * MAX_MESSAGE_CHARS + "..."
    assert brief("abcdef", 3) == "abc..." and brief("abc", 3) == "abc"
