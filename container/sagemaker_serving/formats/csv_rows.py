"""text/csv bodies as TF Serving REST requests: RFC 4180 rows as instances.

A one-column row is a scalar; unquoted numbers are numbers (`nan`, `inf` too), quoted fields
and other text are strings; `header=present` skips the first row, `charset=` decodes.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

from sagemaker_serving.config.body_formats import UTF8_CHARSETS
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request_body import (
    ModelRequest,
    batch_key,
    dumps,
    parse_int,
    wrap,
)

__all__ = ["decode_csv"]

_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)\Z")
_NONFINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
# One RFC 4180 field at a position: quoted (with "" escapes, lenient tail) or plain.
_CSV_FIELD = re.compile(r'"(?:[^"]+|"")*"?[^,]*|[^,]*')
# A field may be as long as the body (whose size nginx limits); the csv module's default
# limit (128 KiB) would refuse a long text or a base64 image.
csv.field_size_limit(2**62)


def _quoted_fields(raw: str) -> list[bool]:
    """Which fields of one raw CSV record were quoted."""
    raw = raw.rstrip("\r\n")
    flags, pos = [], 0
    while True:
        match = _CSV_FIELD.match(raw, pos)
        flags.append(raw.startswith('"', pos))
        pos = match.end() if match else len(raw)
        if pos >= len(raw):
            return flags
        pos += 1  # the comma


class _TooBig(ValueError):
    """A number field beyond a double (the fast path's model server refuses it too)."""


def _csv_value(field: str) -> tuple[Any, bool]:
    """An unquoted CSV field: (int | float | str, is non-finite)."""
    token = field.strip()
    if _INT.match(token) or _FLOAT.match(token):
        value = parse_int(token) if _INT.match(token) else float(token)
        if isinstance(value, float) and math.isinf(value):
            raise _TooBig
        return value, False
    if token.lower() in _NONFINITE:
        return float(token), True
    return field, False


def decode_csv(body: bytes, charset: str, header: bool, method: str) -> ModelRequest:
    """RFC 4180 rows (skipping a header row for `header=present`) as instances."""
    try:
        text = body.decode("utf-8-sig" if charset.lower() in UTF8_CHARSETS else charset)
    except LookupError:
        raise PayloadError(f"Unsupported Media Type: text/csv; charset={charset}", 415) from None
    except UnicodeDecodeError as err:
        raise PayloadError(f"Malformed CSV: not valid {charset}: {err}", 400) from None
    lines = io.StringIO(text, newline="").readlines()  # as csv.reader reads them
    reader = csv.reader(lines, strict=False)
    rows: list[Any] = []
    nonfinite = False
    width = None
    start = 1
    try:
        for fields in reader:
            line, start = start, reader.line_num + 1
            raw = "".join(lines[line - 1 : reader.line_num])  # the record's own text
            if not fields:
                continue
            if header:
                header, width = False, len(fields)
                continue
            if width is None:
                width = len(fields)
            elif len(fields) != width:
                raise PayloadError(
                    f"Malformed CSV: line {line} has {len(fields)} fields, expected {width}", 400
                )
            quoted = _quoted_fields(raw) if '"' in raw else None
            row = []
            for index, field in enumerate(fields):
                if quoted is not None and index < len(quoted) and quoted[index]:
                    row.append(field)
                    continue
                try:
                    value, special = _csv_value(field)
                except _TooBig:
                    raise PayloadError(
                        f"Malformed CSV: line {line}, field {index + 1}: "
                        "number too big to be stored in double",
                        400,
                    ) from None
                nonfinite |= special
                row.append(value)
            rows.append(row[0] if width == 1 else row)
    except csv.Error as err:
        raise PayloadError(f"Malformed CSV: line {reader.line_num}: {err}", 400) from None
    if not rows:
        raise PayloadError("Empty request body: expected CSV rows", 400)
    return ModelRequest(wrap(batch_key(method), dumps(rows, nonfinite)), len(rows))
