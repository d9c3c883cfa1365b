"""The internal error type: an HTTP status and a message for the JSON error body.

Each layer raises its own subclass (tfs_client: the model server's answers, multimodel: the
/models API, formats: undecodable payloads, service.routing: bad custom attributes); the
service turns any of them into `{"error": message}` with that status. User code raises
`sagemaker_serving.HandlerError`, the public type, which the service treats the same way.
"""

from __future__ import annotations


class StatusError(Exception):
    """An answer other than 200: `status` and `message` for the JSON body."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
