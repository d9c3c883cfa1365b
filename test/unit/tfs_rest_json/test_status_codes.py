"""tfs_rest_json.status_codes: TF Serving's HTTP status for each status code."""

from __future__ import annotations

import grpc
import pytest

from tfs_rest_json import http_status
from tfs_rest_json.status_codes import HTTP_STATUS


def test_every_grpc_code_has_an_http_status():
    assert set(HTTP_STATUS) == {code.name for code in grpc.StatusCode}


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("OK", 200),
        ("CANCELLED", 499),  # nginx's "client closed request", as TF Serving answers
        ("INVALID_ARGUMENT", 400),
        ("FAILED_PRECONDITION", 400),
        ("NOT_FOUND", 404),
        ("ABORTED", 409),
        ("RESOURCE_EXHAUSTED", 429),
        ("UNIMPLEMENTED", 501),
        ("UNAVAILABLE", 503),
        ("DEADLINE_EXCEEDED", 504),
        ("DATA_LOSS", 500),
    ],
)
def test_tf_servings_mapping(name, status):
    assert http_status(name) == status


def test_a_name_that_is_no_status_code_is_500():
    assert http_status("NO_SUCH_CODE") == 500
