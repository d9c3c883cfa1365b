"""What user handlers receive and may raise: the AWS container's Context, plus our additions."""

from __future__ import annotations

import json
from collections import namedtuple
from typing import Any

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
    (a status outside 400-599 is answered 500). A message that is no str is written as JSON (a
    dict, a list), else as its str(); a status may be the digits of one ("422")."""

    def __init__(self, message: Any, status: int | str = 400) -> None:
        super().__init__(_text(message), _number(status))


def _text(message: Any) -> str:
    if isinstance(message, dict | list | tuple):
        try:
            return json.dumps(message, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    return message if isinstance(message, str) else str(message)


def _number(status: int | str) -> int:
    """The status as an int; one that is no number is a 500 (http_status)."""
    try:
        return int(status)
    except (TypeError, ValueError):
        return 500
