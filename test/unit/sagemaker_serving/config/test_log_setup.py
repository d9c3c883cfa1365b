"""Log formats: text lines tagged with the request id, JSON objects, wrapped child output."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

from sagemaker_serving.config import log_setup


def _format(formatter: logging.Formatter, message: str, request_id: str | None) -> str:
    record = logging.LogRecord("inference", logging.INFO, __file__, 1, message, (), None)
    token = log_setup.REQUEST_ID.set(request_id)
    try:
        log_setup.RequestIdFilter().filter(record)
    finally:
        log_setup.REQUEST_ID.reset(token)
    return formatter.format(record)


def test_text_lines_carry_the_request_id_only_inside_a_request():
    text = logging.Formatter(log_setup.TEXT_FORMAT)
    assert _format(text, "outside", None).endswith("INFO inference [%d]: outside" % _pid())  # noqa: UP031
    assert _format(text, "inside", "r-1").endswith(f"INFO inference [{_pid()}] [r-1]: inside")


def test_json_lines_name_the_request():
    formatter = log_setup.JsonFormatter()
    outside = json.loads(_format(formatter, "outside", None))
    inside = json.loads(_format(formatter, "inside", "r-1"))
    assert outside["message"] == "outside" and "request_id" not in outside
    assert inside["message"] == "inside" and inside["request_id"] == "r-1"
    assert inside["level"] == "INFO" and inside["logger"] == "inference"
    assert inside["time"].endswith("Z")


def test_configure_sends_every_logger_through_one_json_handler():
    code = """
import logging
from sagemaker_serving.config import log_setup
log_setup.configure("INFO", "json")
logging.getLogger("gunicorn.error").info("from gunicorn")
try:
    raise RuntimeError("boom")
except RuntimeError:
    logging.getLogger("inference").exception("failed")
logging.getLogger("x").debug("below the level")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    gunicorn, failure = (json.loads(line) for line in result.stderr.splitlines())
    assert gunicorn["logger"] == "gunicorn.error" and gunicorn["message"] == "from gunicorn"
    assert failure["level"] == "ERROR" and "RuntimeError: boom" in failure["exc"]


def test_it_imports_only_the_standard_library_as_the_handler_processes_need():
    code = (
        "import sys; before = set(sys.modules)\n"
        "from sagemaker_serving.config import log_setup\n"
        "print(*sorted(set(sys.modules) - before))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    imported = {name.split(".")[0] for name in result.stdout.split()}
    foreign = imported - set(sys.stdlib_module_names) - {"sagemaker_serving"}
    assert imported and not foreign, foreign


def test_child_output_is_wrapped_unless_already_json(capsys):
    stream = io.BytesIO(
        b"2026-11-23 12:00:00 E tensorflow ERROR: failed\n\n"
        b'{"level": "INFO", "message": "already"}\n'
        b"nginx: [warn] low\xff\n"
    )
    log_setup.relay("model-server-0", stream, as_json=True)
    first, second, third = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["logger"] == "model-server-0" and first["level"] == "ERROR"
    assert second == {"level": "INFO", "message": "already"}
    assert third["level"] == "WARNING" and third["message"] == "nginx: [warn] low\ufffd"


def _pid() -> int:
    import os

    return os.getpid()


class Trickle(io.RawIOBase):
    """A child's pipe: what it wrote, handed out in the given pieces."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        buffer[: len(piece)] = piece
        return len(piece)


def test_child_output_is_relayed_in_whole_lines(capsys):
    pieces = [b'127.0.0.1 [2026-11-23T12:00:00] "GET /pi', b'ng HTTP/1.1" 200 0\nnext ',
              b"line\n\xff bad byte\n", b"no end"]  # fmt: skip
    log_setup.relay("nginx", io.BufferedReader(Trickle(pieces), 8))
    assert capsys.readouterr().err == (
        '127.0.0.1 [2026-11-23T12:00:00] "GET /ping HTTP/1.1" 200 0\n'
        "next line\n\ufffd bad byte\nno end\n"
    )


def test_a_line_without_end_is_written_in_parts_past_the_bound(capsys, monkeypatch):
    monkeypatch.setattr(log_setup, "MAX_LINE", 10)
    monkeypatch.setattr(log_setup, "RELAY_READ", 6)
    log_setup.relay("x", io.BufferedReader(Trickle([b"a" * 6, b"a" * 6, b"b\n"]), 6))
    assert capsys.readouterr().err == "a" * 12 + "\nb\n"
