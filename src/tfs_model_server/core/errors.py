"""Canonical error codes and the error type every layer raises.

TF Serving reports failures as absl status codes; REST maps them to HTTP
statuses (http_server.cc ToHTTPStatusCode) and gRPC sends them as they are.
"""

from __future__ import annotations

import enum

import grpc


class Code(enum.Enum):
    """absl::StatusCode, with the HTTP status TF Serving's REST API maps it to."""

    OK = (0, 200)
    CANCELLED = (1, 499)
    UNKNOWN = (2, 500)
    INVALID_ARGUMENT = (3, 400)
    DEADLINE_EXCEEDED = (4, 504)
    NOT_FOUND = (5, 404)
    ALREADY_EXISTS = (6, 409)
    PERMISSION_DENIED = (7, 403)
    RESOURCE_EXHAUSTED = (8, 429)
    FAILED_PRECONDITION = (9, 400)
    ABORTED = (10, 409)
    OUT_OF_RANGE = (11, 400)
    UNIMPLEMENTED = (12, 501)
    INTERNAL = (13, 500)
    UNAVAILABLE = (14, 503)
    DATA_LOSS = (15, 500)
    UNAUTHENTICATED = (16, 401)

    @property
    def number(self) -> int:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return grpc.StatusCode[self.name]


class ServingError(Exception):
    """A failure with a canonical code and TF Serving's message text."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ServingError({self.code.name}, {self.message!r})"


def invalid_argument(message: str) -> ServingError:
    return ServingError(Code.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(Code.NOT_FOUND, message)


def failed_precondition(message: str) -> ServingError:
    return ServingError(Code.FAILED_PRECONDITION, message)


def unimplemented(message: str) -> ServingError:
    return ServingError(Code.UNIMPLEMENTED, message)


def unavailable(message: str) -> ServingError:
    return ServingError(Code.UNAVAILABLE, message)


def deadline_exceeded(message: str) -> ServingError:
    return ServingError(Code.DEADLINE_EXCEEDED, message)


def internal(message: str) -> ServingError:
    return ServingError(Code.INTERNAL, message)
