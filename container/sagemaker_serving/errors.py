"""The error hierarchy and the one JSON error body of the Python service.

`StatusError` carries its HTTP status. Each layer raises its own subclass (tfs_client: the
model server's answers, multimodel: the /models API, formats: undecodable payloads,
service.routing: bad custom attributes); user code raises `sagemaker_serving.HandlerError`,
one too. `error_body` writes every JSON error body the service answers,
`{"error": message, "request_id": id}`: the keys nginx's own error answers have
(nginx/nginx.conf.template, tfs.js's sendError). service/error_answers.py maps exceptions to
it on falcon's side.

Standard library only at import: handler processes import it (through HandlerError) under
the user's interpreter.
"""

from __future__ import annotations

MAX_MESSAGE_CHARS = 4096  # an error message is brief: what is wrong, not a dump


class StatusError(Exception):
    """An answer other than 200: `status` and `message` for the JSON body."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def http_status(self) -> int:
        """`status` when it is an error status (400-599), else 500: a handler's 200 or 999
        is no answer a client can be given."""
        return self.status if 400 <= self.status <= 599 else 500


def brief(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` cut at `limit` characters (marked with "...")."""
    return message[:limit] + "..." if len(message) > limit else message


def error_body(message: str, request_id: str) -> bytes:
    """The JSON body of an error answer (the message kept brief), one line."""
    import orjson  # the service's: only the service writes error bodies

    return orjson.dumps({"error": brief(message), "request_id": request_id}) + b"\n"
