"""The formats' error: a client payload (or a model server answer) they cannot convert."""

from __future__ import annotations

from sagemaker_serving.errors import StatusError

__all__ = ["PayloadError"]


class PayloadError(StatusError, ValueError):
    """Bad client payload: status (400, 406, 415; 502 for an answer that is none) and a
    message for the JSON error body."""
