"""A model server's successful answer as the client's Accept asks: JSON, JSON Lines or CSV.

The conversion works on the answer's text, so every number keeps the text TF Serving wrote
(`4.0`, `0.123456791`, int64 beyond 2**53, `NaN`) and every string its escapes. The gRPC
tensor path first writes TF Serving's text (tfs_rest_json), so all paths answer the same bytes;
the cases are in test/support/format_cases.py and answer_cases.py.

- JSON: TF Serving's answer on one line (body_formats.JSON_ANSWER_BREAKS: nginx removes the
  same from the answer to a TF Serving request it passes straight on).
- JSON Lines: one line per prediction, its text in the answer with each newline and the
  indentation after it removed.
- CSV: one row per prediction, its leaves in order: numbers and true/false as written, strings
  unescaped (quoted as RFC 4180 when they hold `"`, `,`, CR or LF), `{"b64": s}` as s, null as
  an empty field; a row with no text is written `""` (a blank line would be no row at all).
- Predictions: the items of `predictions` / `results`; columnar `outputs` give one per index
  when every output is a list of one length (an object of those items), else the whole value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sagemaker_serving.config.body_formats import (
    ANSWER_KEYS,
    COLUMNAR_ANSWER_KEY,
    CSV,
    ERROR_KEY,
    JSON,
    JSON_ANSWER_BREAKS,
)
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.media import negotiate

__all__ = ["NOT_AN_ANSWER", "encode_response", "model_server_error", "one_line"]

NOT_AN_ANSWER = "The model server answered with a body that is not a TF Serving answer"

_BREAK = re.compile("|".join(JSON_ANSWER_BREAKS).encode())  # literal: newlines and spaces
_LINE_BREAK = re.compile(rb"\n\s*")  # and the indentation after it, for rows taken apart
_ANSWER_START = re.compile(rf'\{{\s*"({"|".join(ANSWER_KEYS)})"\s*:\s*')
_CSV_DROP = re.compile(r"[\[\] \t\r\n]")  # a value's brackets and whitespace
_CSV_DROP_KEEP_LF = re.compile(r"[\[\] \t\r]")
_CSV_QUOTE = re.compile(r'[",\r\n]')


class _Number(str):
    """A JSON number (or NaN/Infinity token) as its text."""


_DECODER = json.JSONDecoder(parse_float=_Number, parse_int=_Number, parse_constant=_Number)


# One prediction: the text of a value, or (columnar) its (key text, item text) pairs.
_Row = str | tuple[tuple[str, str], ...]


def one_line(body: bytes) -> bytes:
    """A JSON answer of the model server's on one line (body_formats.JSON_ANSWER_BREAKS)."""
    return _BREAK.sub(b"", body)


def model_server_error(body: bytes, request_id: str) -> bytes:
    """A model server's error answer as it wrote it, on one line, naming the request
    (body_formats.ERROR_KEY)."""
    key = ERROR_KEY.encode()
    named = b'"request_id": %s, %s' % (json.dumps(request_id).encode(), key)
    return one_line(body).replace(key, named, 1)


def encode_response(tfs_body: bytes, accept: str | None) -> tuple[bytes, str]:
    """A successful TF Serving answer as Accept asks: (body, content type).

    Raises PayloadError: 406 when Accept allows no supported type, 502 when the answer is not
    a TF Serving predict/classify/regress document (for JSON Lines and CSV, which read it).
    """
    chosen = negotiate(accept)
    if chosen == JSON:  # TF Serving's answer as it wrote it, on one line (as nginx's)
        return one_line(tfs_body), chosen
    try:
        text = _LINE_BREAK.sub(b"", tfs_body.strip()).decode("utf-8", "replace")
        return _convert(text, chosen), chosen
    except ValueError:
        raise PayloadError(NOT_AN_ANSWER, 502) from None


def _convert(text: str, chosen: str) -> bytes:
    rows = _rows(text)
    if not rows:
        return b""
    texts = [row for row in rows if isinstance(row, str)]
    plain = len(texts) == len(rows)
    if plain and chosen != CSV:
        return ("\n".join(texts) + "\n").encode()
    body = _numeric_csv(texts) if plain else None
    if body is None:
        line = _csv_line if chosen == CSV else _json_line
        body = "".join(line(row) + "\n" for row in rows)
    return body.encode()


def _numeric_csv(rows: list[str]) -> str | None:
    """CSV rows of numbers (and true/false) at once: their brackets and spaces go in one pass
    (None when some row is not such, or would be empty)."""
    joined = "\n".join(rows)
    if '"' in joined or "null" in joined:
        return None
    body = _CSV_DROP_KEEP_LF.sub("", joined)
    if not body or body.startswith("\n") or body.endswith("\n") or "\n\n" in body:
        return None
    return body + "\n"


def _answer_value(text: str) -> tuple[str, str]:
    """(key, value text) of TF Serving's one-member answer object."""
    match = _ANSWER_START.match(text)
    if match is None or not text.endswith("}"):
        raise ValueError(f"not a TF Serving answer: no {' or '.join(ANSWER_KEYS)} key")
    return match[1], text[match.end() : -1].strip()


def _rows(text: str) -> Sequence[_Row]:
    key, value = _answer_value(text)
    if value.startswith("["):
        return _items(value)
    if key == COLUMNAR_ANSWER_KEY and value.startswith("{"):
        members = _members(value)
        columns = [_items(item) if item.startswith("[") else None for _, item in members]
        sizes = {len(column) for column in columns if column is not None}
        if len(members) > 1 and None not in columns and len(sizes) == 1:
            names = [name for name, _ in members]
            return [tuple(zip(names, items, strict=True)) for items in zip(*columns, strict=True)]
    return [value]


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _value_end(text: str, pos: int) -> int:
    try:
        return _DECODER.raw_decode(text, pos)[1]
    except json.JSONDecodeError as err:
        raise ValueError(f"not a JSON value at {pos}: {err}") from None


def _items(array: str) -> list[str]:
    """The texts of a JSON array's items."""
    if '"' not in array and "{" not in array:
        return _numeric_items(array)
    items, pos = [], _skip_space(array, 1)
    while pos < len(array) and array[pos] != "]":
        end = _value_end(array, pos)
        items.append(array[pos:end])
        pos = _skip_space(array, end)
        if pos < len(array) and array[pos] == ",":
            pos = _skip_space(array, pos + 1)
    return items


def _numeric_items(array: str) -> list[str]:
    """The items of an array of numbers or of equally nested arrays of them (a tensor), by
    splitting where the items' closing brackets meet a comma."""
    inner = array[1:-1].strip()
    if not inner:
        return []
    depth = len(inner) - len(inner.lstrip("["))
    if depth == 0:
        return [item.strip() for item in inner.split(",")]
    close = "]" * depth
    pieces = inner.split(close + ",")
    return [piece.strip() + close for piece in pieces[:-1]] + [pieces[-1].strip()]


def _members(obj: str) -> list[tuple[str, str]]:
    """(key text, value text) of a JSON object's members."""
    members, pos = [], _skip_space(obj, 1)
    while pos < len(obj) and obj[pos] != "}":
        key_end = _value_end(obj, pos)
        start = _skip_space(obj, _skip_space(obj, key_end) + 1)  # past the colon
        end = _value_end(obj, start)
        members.append((obj[pos:key_end], obj[start:end]))
        pos = _skip_space(obj, end)
        if pos < len(obj) and obj[pos] == ",":
            pos = _skip_space(obj, pos + 1)
    return members


def _json_line(row: _Row) -> str:
    if isinstance(row, str):
        return row
    return "{" + ",".join(f"{name}: {item}" for name, item in row) + "}"


def _csv_line(row: _Row) -> str:
    texts = [row] if isinstance(row, str) else [item for _, item in row]
    fields = [field for text in texts for field in _csv_fields(text)]
    return ",".join(fields) or '""'


def _csv_fields(text: str) -> list[str]:
    """A value's leaves as CSV fields."""
    if '"' not in text and "null" not in text:  # numbers, true/false: as written
        joined = _CSV_DROP.sub("", text)
        return [joined] if joined else []
    fields: list[str] = []
    _leaves(_DECODER.decode(text), fields)
    return fields


def _leaves(value: object, out: list[str]) -> None:
    if isinstance(value, _Number):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(_csv_quoted(value))
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif value is None:
        out.append("")
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("b64"), str):
            out.append(_csv_quoted(value["b64"]))
            return
        for item in value.values():
            _leaves(item, out)


def _csv_quoted(text: str) -> str:
    if _CSV_QUOTE.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text
