"""Media types: the names the built-in formats read, Content-Type parameters, and the answer
type an Accept header asks for (the njs fast path, nginx/tfs.js, keeps the same tables)."""

from __future__ import annotations

import json
import re

from sagemaker_serving.formats.errors import PayloadError

__all__ = [
    "ACCEPT_TYPES",
    "BINARY_TYPES",
    "BUILTIN_TYPES",
    "BYTES_TYPES",
    "CSV",
    "JSON",
    "JSON_LINES_NAMES",
    "JSON_LINES_TYPES",
    "JSON_TYPES",
    "NPY",
    "TEXT_TYPES",
    "TFEXAMPLE_TYPES",
    "client_text",
    "media_params",
    "media_type",
    "negotiate",
]

JSON = "application/json"
# curl -d sends application/x-www-form-urlencoded: such bodies are read as JSON.
JSON_TYPES = frozenset({JSON, "application/x-www-form-urlencoded"})
JSON_LINES_NAMES = (
    "application/jsonlines",
    "application/jsons",
    "application/x-jsonlines",
    "application/json-lines",
    "application/x-ndjson",
    "application/ndjson",
)
JSON_LINES_TYPES = frozenset(JSON_LINES_NAMES)
CSV = "text/csv"
BYTES_TYPES = frozenset({"application/x-image", "application/octet-stream"})
NPY = "application/x-npy"
TFEXAMPLE_TYPES = frozenset(
    {"application/x-tfexample", "application/tfrecord", "application/x-tfrecord"}
)

TEXT_TYPES = frozenset({*JSON_TYPES, *JSON_LINES_TYPES, CSV})
BINARY_TYPES = frozenset({NPY, *BYTES_TYPES, *TFEXAMPLE_TYPES})
BUILTIN_TYPES: frozenset[str] = TEXT_TYPES | BINARY_TYPES

# Accept: supported answer types in tie-break order (a wildcard prefers the earliest).
ACCEPT_TYPES = (JSON, *JSON_LINES_NAMES, CSV)
SUPPORTED = "application/json, application/jsonlines, text/csv"
MAX_ECHO = 200  # characters of a client's header echoed in an error message

_QVALUE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\Z")


def media_type(header: str | None) -> str:
    """The media type of a Content-Type/Accept value: lower-case, params stripped, "" if none."""
    if not header:
        return ""
    return header.split(";", 1)[0].strip().lower()


def media_params(header: str) -> dict[str, str]:
    """Media-type parameters, names lower-cased, values unquoted."""
    params: dict[str, str] = {}
    for part in header.split(";")[1:]:
        name, sep, value = part.partition("=")
        if sep:
            params[name.strip().lower()] = value.strip().strip('"')
    return params


def client_text(value: str) -> str:
    """A client's header value for an error message: valid UTF-8, cut, in JSON quotes."""
    text = value.encode("latin-1", "replace").decode("utf-8", "replace")
    if len(text) > MAX_ECHO:
        text = text[:MAX_ECHO] + "..."
    return json.dumps(text, ensure_ascii=False)


def _q(entry: str) -> float:
    """An Accept range's q (1 without one; 0, never chosen, when it is not a number in [0, 1])."""
    q = 1.0
    for param in entry.split(";")[1:]:
        name, sep, value = param.partition("=")
        if sep and name.strip().lower() == "q":
            text = value.strip().strip('"')
            q = float(text) if _QVALUE.match(text) else 0.0
    return q if q <= 1.0 else 0.0


def _specificity(range_type: str, supported: str) -> int:
    """How closely a media range matches a supported type: 2 exactly, 1 `main/*`, 0 `*/*`,
    -1 not at all."""
    if range_type == supported:
        return 2
    if range_type == supported.split("/")[0] + "/*":
        return 1
    return 0 if range_type in ("*/*", "*") else -1


def negotiate(accept: str | None) -> str:
    """The answer's type for an Accept header: each supported type takes the q of its most
    specific range (q=0: not acceptable); the highest q wins, then the earliest range, then
    the order of ACCEPT_TYPES. Raises PayloadError(406) when none is acceptable."""
    if not accept or not accept.strip():
        return JSON
    ranked: dict[str, tuple[int, float, int]] = {}  # type -> (specificity, q, range index)
    for index, entry in enumerate(accept.split(",")):
        range_type = entry.split(";", 1)[0].strip().lower()
        if not range_type:
            continue
        q = _q(entry)
        for supported in ACCEPT_TYPES:
            specificity = _specificity(range_type, supported)
            if specificity > ranked.get(supported, (-1, 0.0, 0))[0]:
                ranked[supported] = (specificity, q, index)
    choices = [
        (-q, index, ACCEPT_TYPES.index(name), name)
        for name, (_, q, index) in ranked.items()
        if q > 0
    ]
    if not choices:
        raise PayloadError(f"Not Acceptable: {client_text(accept)} (supported: {SUPPORTED})", 406)
    return min(choices)[3]
