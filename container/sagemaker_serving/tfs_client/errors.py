"""What a call to a model server can fail with."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sagemaker_serving.errors import StatusError

log = logging.getLogger(__name__)

UNAVAILABLE = "The model server is unavailable"
TOO_LATE = "The model server did not answer before the request deadline"
DEADLINE_PASSED = "The request deadline passed before the model server answered"


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
    """503: the model server could not be reached. Why (refused, reset, at which internal
    address) goes to the log, never to the client."""

    def __init__(self, reason: object) -> None:
        log.warning("the model server is unavailable: %s", reason)
        super().__init__(UNAVAILABLE, 503)


class ModelServerTimeout(ModelServerError):
    def __init__(self, message: str = TOO_LATE) -> None:
        super().__init__(message, 504)
