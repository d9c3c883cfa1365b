"""The HTTP status TF Serving's REST API answers for each canonical status code.

TF Serving's HTTP server maps an absl::Status to HTTP with ToHTTPStatusCode(); the gRPC status
codes carry the same names and numbers, so a gRPC error maps the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

HTTP_STATUS: Mapping[str, int] = MappingProxyType(
    {
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
)


def http_status(code_name: str) -> int:
    """The HTTP status for a status code name ('NOT_FOUND' -> 404); 500 for any other name."""
    return HTTP_STATUS.get(code_name, 500)
