"""Canonical error codes and the error type every layer raises.

TF Serving reports failures as absl status codes; REST maps them to HTTP statuses
(tfs_rest_json.http_status) and gRPC sends them as they are.
"""

from __future__ import annotations

import enum
import functools

import grpc

from tfs_rest_json import http_status


class Code(enum.Enum):
    """absl::StatusCode (the gRPC status codes: same names, same numbers)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @property
    def number(self) -> int:
        return self.value

    @property
    def http_status(self) -> int:
        """The HTTP status TF Serving's REST API answers with."""
        return http_status(self.name)

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

    def status_text(self) -> str:
        """absl::Status::ToString(): `CODE: message`."""
        return f"{self.code.name}: {self.message}"


def code_of(exc: BaseException) -> Code:
    """The canonical code `exc` carries: a ServingError's, TensorFlow's (an OpError's
    `error_code`, the same numbers), RESOURCE_EXHAUSTED for a MemoryError, else UNKNOWN. Never
    guessed from the message's words."""
    if isinstance(exc, ServingError):
        return exc.code
    if isinstance(exc, MemoryError):
        return Code.RESOURCE_EXHAUSTED
    number = getattr(exc, "error_code", None)
    if isinstance(number, int) and not isinstance(number, bool) and number > 0:
        try:
            return Code(number)
        except ValueError:
            pass
    return Code.UNKNOWN


# One constructor per code the server raises: invalid_argument("text") -> ServingError.
invalid_argument = functools.partial(ServingError, Code.INVALID_ARGUMENT)
not_found = functools.partial(ServingError, Code.NOT_FOUND)
failed_precondition = functools.partial(ServingError, Code.FAILED_PRECONDITION)
unimplemented = functools.partial(ServingError, Code.UNIMPLEMENTED)
unavailable = functools.partial(ServingError, Code.UNAVAILABLE)
deadline_exceeded = functools.partial(ServingError, Code.DEADLINE_EXCEEDED)
internal = functools.partial(ServingError, Code.INTERNAL)
