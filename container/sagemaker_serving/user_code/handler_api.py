"""What user handlers receive and may raise: the AWS container's Context, plus our additions."""

from __future__ import annotations

from collections import namedtuple

from sagemaker_serving.errors import StatusError

# The ten fields of the AWS container's Context, in its order, then ours: the request id, the
# request's deadline (time.monotonic()) and the seconds left at the start, and the default model.
Context = namedtuple(
    "Context",
    [
        "model_name",
        "model_version",
        "method",
        "rest_uri",
        "grpc_port",
        "channel",
        "custom_attributes",
        "request_content_type",
        "accept_header",
        "content_length",
        "request_id",
        "deadline",
        "timeout",
        "default_model_name",
    ],
)


class HandlerError(StatusError):
    """Raise from a handler to answer with a status (400 by default) and a JSON error message
    (a status outside 400-599 is answered 500)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message, status)
