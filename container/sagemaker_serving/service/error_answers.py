"""The Python service's error answers: an exception becomes an HTTP status and the one JSON
error body (errors.error_body), here for every route of the falcon app.

A StatusError (HandlerError, PayloadError, MultiModelError, ModelServerError, ...) answers
with its own status; falcon's errors (404, 405, bad headers) with theirs and their headers;
anything else is a 500 whose stack trace goes to the log, not to the client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from http import HTTPStatus

import falcon
import falcon.asgi
from falcon.asgi import Request, Response

from sagemaker_serving.errors import StatusError, error_body
from sagemaker_serving.user_code.contract import HandlerResultError

log = logging.getLogger("sagemaker_serving.service")

# The request itself ending (its task cancelled, its answer's generator closed): passed on,
# never answered. Anything else a handler raises, BaseException too (sys.exit()), is answered.
REQUEST_ENDING = (asyncio.CancelledError, GeneratorExit)


def status_and_message(exc: BaseException, failed: str = "unhandled error") -> tuple[int, str]:
    """What `exc` answers. A handler that broke the contract is logged with its stack trace,
    and so is anything unexpected (as `failed`)."""
    if isinstance(exc, HandlerResultError):
        log.error("%s", exc.message, exc_info=exc)
    if isinstance(exc, StatusError):
        return exc.http_status, exc.message
    if isinstance(exc, falcon.HTTPError):  # its title is the status line ("405 Method ...")
        return exc.status_code, exc.description or HTTPStatus(exc.status_code).phrase
    log.error("%s", failed, exc_info=exc)
    return 500, f"{type(exc).__name__}: {exc}"


def write_error(
    resp: Response, status: int, message: str, request_id: str, quoted: Iterable[str] = ()
) -> None:
    """The error answer: `status` and the JSON error body (`quoted`: the client's words in
    `message`, kept as sent)."""
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = "application/json"
    resp.data = error_body(message, request_id, quoted)


async def _answer(req: Request, resp: Response, ex: Exception, params: dict) -> None:
    """falcon's error handler: whatever a responder raised, as its JSON error answer."""
    request_id = req.get_header("X-Request-Id") or ""
    status, message = status_and_message(ex, f"unhandled error (request {request_id})")
    write_error(resp, status, message, request_id, getattr(ex, "quoted", ()))
    if isinstance(ex, falcon.HTTPError):
        for name, value in dict(ex.headers or {}).items():
            if name.lower() == "allow":  # falcon lists OPTIONS, which every route refuses
                value = ", ".join(m for m in value.split(", ") if m != "OPTIONS")
            resp.set_header(name, value)


def add_error_answers(app: falcon.asgi.App) -> None:
    """Every exception a responder raises (falcon's own too) answered by `_answer`."""
    app.add_error_handler(Exception, _answer)
    app.add_error_handler(falcon.HTTPError, _answer)
