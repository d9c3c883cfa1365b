"""The error hierarchy, the one JSON error body of the Python service, and start-up's errors.

`StatusError` carries its HTTP status. Each layer raises its own subclass (tfs_client: the
model server's answers, multimodel: the /models API, formats: undecodable payloads,
service.routing: bad custom attributes); user code raises `sagemaker_serving.HandlerError`,
one too. `error_body` writes every JSON error body the service answers,
`{"error": message, "request_id": id}`: the keys nginx's own error answers have (nginx/tfs.js's
`error`, with the messages of launcher/nginx_config.py). service/error_answers.py maps
exceptions to it on falcon's side. A model server's own error answer passes through as it is.

`StartupError` is the base of what stops serve before it starts anything (settings, model
discovery, the front port, nginx's setup, the run directory, universal and user code): serve
logs "cannot start: <message>" and exits 2.

No answer names an internal address or path (`public_text`, applied by `error_body`): a
loopback URL (the model server's, in a handler's `raise_for_status()`) becomes "the model
server", and the folders this process hides (`hide_paths`: the model directory, the run
directory) become model-relative paths or a placeholder. What the client sent and the message
quotes (`StatusError.quoted`: a multi-model load's url and name) is kept as sent. The layers
build their messages without such paths in the first place; this is the safety net.

Standard library only at import: handler processes import it (through HandlerError) under
the user's interpreter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_MESSAGE_CHARS = 4096  # an error message is brief: what is wrong, not a dump


class StartupError(Exception):
    """serve cannot start; the message says why. Each start-up step raises its own subclass."""


class StatusError(Exception):
    """An answer other than 200: `status` and `message` for the JSON body."""

    def __init__(self, message: str, status: int, quoted: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.quoted = tuple(quoted)  # what the client sent, quoted in `message`: kept as sent

    @property
    def http_status(self) -> int:
        """`status` when it is an error status (400-599), else 500: a handler's 200 or 999
        is no answer a client can be given."""
        return self.status if 400 <= self.status <= 599 else 500


def brief(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` cut at `limit` characters (marked with "...")."""
    return message[:limit] + "..." if len(message) > limit else message


MODEL_SERVER = "the model server"
# a loopback address with its port (the model servers' and the service's own hops), with its
# scheme and path when it is a URL: `http://127.0.0.1:8501/v1/models/m:predict`,
# `ipv4:127.0.0.1:9000`, `localhost:8500`
_LOOPBACK = re.compile(
    r"(?:\b[a-z][a-z0-9+.-]*://)?(?<![\w.-])"
    r"(?:127(?:\.\d{1,3}){3}|localhost|\[::1\]|0\.0\.0\.0):\d{1,5}"
    r"(?:/[^\s'\"<>]*)?",
    re.IGNORECASE,
)
_hidden: list[tuple[re.Pattern[str], str]] = []  # hide_paths: (a folder, what answers say)


def hide_paths(paths: Mapping[str, str]) -> None:
    """The folders this process's answers never name: each absolute path -> what is said
    instead ("" for the model directory: paths under it become model-relative)."""
    _hidden.clear()
    for path in sorted((p.rstrip("/") for p in paths if p.strip("/")), key=len, reverse=True):
        # the folder itself or under it, never a longer name that starts the same way
        _hidden.append((re.compile(re.escape(path) + r"(?:/|(?![\w.-]))"), paths[path]))


def _scrub(text: str) -> str:
    text = _LOOPBACK.sub(MODEL_SERVER, text)
    for pattern, instead in _hidden:
        under, itself = (f"{instead}/", instead) if instead else ("", ".")
        text = pattern.sub(lambda m: under if m.group().endswith("/") else itself, text)  # noqa: B023
    return text


def public_text(message: str, quoted: Iterable[str] = ()) -> str:
    """`message` without internal addresses or paths; the `quoted` parts (the client's own
    words) as they are."""
    kept = sorted({q for q in quoted if q}, key=len, reverse=True)
    if not kept:
        return _scrub(message)
    parts = re.split("(" + "|".join(map(re.escape, kept)) + ")", message)
    return "".join(part if i % 2 else _scrub(part) for i, part in enumerate(parts))


def error_body(message: str, request_id: str, quoted: Iterable[str] = ()) -> bytes:
    """The JSON body of an error answer (the message public and brief), one line."""
    import orjson  # the service's: only the service writes error bodies

    text = brief(public_text(message, quoted))
    # a lone surrogate (text decoded with surrogateescape) is no UTF-8: written as its escape
    text = text.encode("utf-8", "backslashreplace").decode()
    return orjson.dumps({"error": text, "request_id": request_id}) + b"\n"
