"""Log lines for serve, the Python service and the handler processes: text or JSON, with the
request id when one is being handled (set around each request, so user code's log lines carry
it). The one definition of both formats.

Standard library only: the handler processes (environments/host.py) configure their logging
with it under the user's interpreter. (orjson would write a JSON line in 0.4 us instead of 8:
nothing, at a few lines per request.)
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.config
import sys
import threading
from contextvars import ContextVar
from typing import IO, Any

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]%(request_tag)s: %(message)s"

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (None outside a request) and `request_tag` (" [id]" or "")."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = REQUEST_ID.get()
        record.request_id = request_id
        record.request_tag = f" [{request_id}]" if request_id else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, pid, message, request_id, exc."""

    def format(self, record: logging.LogRecord) -> str:
        created = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        doc: dict[str, Any] = {
            "time": created.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            doc["request_id"] = request_id
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return _json(doc)


def _json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, default=str)


_LEVELS = (("CRITICAL", "CRITICAL"), ("FATAL", "CRITICAL"), ("ERROR", "ERROR"),
           ("[emerg]", "CRITICAL"), ("[alert]", "CRITICAL"), ("[crit]", "CRITICAL"),
           ("[error]", "ERROR"), ("WARN", "WARNING"), ("[warn]", "WARNING"))  # fmt: skip
# serve is the one writer of every log line of the stack (its own, and what its children write,
# relayed from their pipes): whole lines, one writer at a time, so that nothing is lost or cut
# whatever stderr is (a file opened with `>`, a pipe, a terminal)
OUTPUT_LOCK = threading.RLock()
RELAY_READ = 65536  # bytes a relay takes from a child's pipe at a time
MAX_LINE = 1 << 20  # a longer line without its end is written as it is, in parts


def write_out(text: str) -> None:
    """Whole lines to stderr, in one write, under OUTPUT_LOCK."""
    with OUTPUT_LOCK:
        sys.stderr.write(text)
        sys.stderr.flush()


class SharedStreamHandler(logging.StreamHandler):
    """logging's stream handler, writing under OUTPUT_LOCK (a child's relayed lines never
    interleave with a log record)."""

    def emit(self, record: logging.LogRecord) -> None:
        with OUTPUT_LOCK:
            super().emit(record)


def _json_lines(name: str, text: str) -> str:
    """Each line as a JSON log line: JSON objects as they are; others wrapped as {"time",
    "level" (guessed from the text), "logger": name, "message"}; blank lines dropped."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("{") and line.endswith("}"):
            out.append(line)
            continue
        upper = line[:120]
        level = next((lvl for mark, lvl in _LEVELS if mark in upper), "INFO")
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        doc = {"time": now.replace("+00:00", "Z"), "level": level, "logger": name}
        out.append(_json({**doc, "message": line}))
    return "".join(line + "\n" for line in out)


def relay(name: str, stream: IO[bytes], as_json: bool = False) -> None:
    """Copy a child's output (its stdout and stderr, one pipe) to serve's stderr until it
    closes: whole lines, in the order written, many at a time (nginx's access log comes in
    blocks); `as_json` wraps lines that are not JSON (_json_lines)."""
    pending = b""
    while True:
        chunk = stream.read1(RELAY_READ)  # type: ignore[attr-defined]
        if not chunk:
            break
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) >= MAX_LINE:
            cut = len(data)
        pending = data[cut:]
        if cut:
            text = data[:cut].decode("utf-8", errors="replace")
            write_out(_json_lines(name, text) if as_json else _ended(text))
    if pending:
        text = pending.decode("utf-8", errors="replace")
        write_out(_json_lines(name, text) if as_json else _ended(text))


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def configure(level: str, log_format: str) -> None:
    """Everything to stderr in `log_format` (one of LOG_FORMATS, as every caller's settings or
    arguments checked), gunicorn's loggers through the same handler."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    )
    level = level.upper()
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"default": formatter},
        "handlers": {
            "stderr": {
                "class": f"{__name__}.SharedStreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "default",
                "filters": ["request_id"],
            }
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": [], "propagate": True},
            # nginx writes the access log; gunicorn's would repeat it
            "gunicorn.access": {"level": "WARNING", "handlers": [], "propagate": True},
        },
    }
    logging.config.dictConfig(config)
