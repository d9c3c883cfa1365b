"""Log lines for serve and the Python service: text or JSON, with the request id when one is
being handled (set by the service around each request, so user code's log lines carry it)."""

from __future__ import annotations

import datetime
import logging
import logging.config
import sys
import threading
from contextvars import ContextVar
from typing import IO, Any

import orjson

from sagemaker_serving.config.settings import LOG_FORMATS

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
        return orjson.dumps(doc, default=str).decode()


_LEVELS = (("CRITICAL", "CRITICAL"), ("FATAL", "CRITICAL"), ("ERROR", "ERROR"),
           ("[emerg]", "CRITICAL"), ("[alert]", "CRITICAL"), ("[crit]", "CRITICAL"),
           ("[error]", "ERROR"), ("WARN", "WARNING"), ("[warn]", "WARNING"))  # fmt: skip
_relay_lock = threading.Lock()


def relay_as_json(name: str, stream: IO[bytes]) -> None:
    """Copy a child's output lines to stdout as JSON log lines until it closes.

    Lines that already are JSON objects pass through; other lines become
    {"time", "level", "logger": name, "message"} with the level guessed from the text.
    """
    for raw in stream:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith("{") and line.endswith("}"):
            out = line
        else:
            upper = line[:120]
            level = next((lvl for mark, lvl in _LEVELS if mark in upper), "INFO")
            now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
            doc = {"time": now.replace("+00:00", "Z"), "level": level, "logger": name}
            out = orjson.dumps({**doc, "message": line}).decode()
        with _relay_lock:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()


def logging_config(level: str, log_format: str) -> dict[str, Any]:
    """A logging.config.dictConfig document: everything to stderr in `log_format`; gunicorn's
    loggers go through the same handler (its logconfig_dict takes this document too)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: expected one of {', '.join(LOG_FORMATS)}")
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    )
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"default": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
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


def configure(level: str, log_format: str) -> None:
    logging.config.dictConfig(logging_config(level, log_format))
