"""tfs_rest_json.status_codes: TF Serving's HTTP status for each status code."""

from __future__ import annotations

import grpc

from tfs_rest_json import http_status


def test_every_grpc_code_has_tf_servings_http_status():
    expected = {
        "OK": 200,
        "CANCELLED": 499,
        "UNKNOWN": 500,
        "INVALID_ARGUMENT": 400,
        "DEADLINE_EXCEEDED": 504,
        "NOT_FOUND": 404,
        "ALREADY_EXISTS": 409,
        "PERMISSION_DENIED": 403,
        "RESOURCE_EXHAUSTED": 429,
        "FAILED_PRECONDITION": 400,
        "ABORTED": 409,
        "OUT_OF_RANGE": 400,
        "UNIMPLEMENTED": 501,
        "INTERNAL": 500,
        "UNAVAILABLE": 503,
        "DATA_LOSS": 500,
        "UNAUTHENTICATED": 401,
    }
    assert {code.name: http_status(code.name) for code in grpc.StatusCode} == expected


def test_a_name_that_is_no_status_code_is_500():
    assert http_status("NO_SUCH_CODE") == 500
