"""What a call to a model server can fail with."""

from __future__ import annotations

from dataclasses import dataclass

from sagemaker_serving.errors import StatusError

UNAVAILABLE = "The model server is unavailable"  # why (refused, reset, ...) goes to the log


class ModelServerError(StatusError):
    """The model server answered with an error: its status and text (TF Serving's words)."""


@dataclass(frozen=True)
class ConfigRefused:
    """Why a model server did not apply a model config: its status code's name (gRPC's and
    TF Serving's) and its text."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ModelServerUnavailable(ModelServerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 503)


class ModelServerTimeout(ModelServerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 504)
