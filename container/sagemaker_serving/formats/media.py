"""Media types: Content-Type parameters, and the answer type an Accept header asks for. The
tables (which names each format reads, the Accept names) are config/body_formats.py's, which the
njs fast path (nginx/tfs.js) is given too."""

from __future__ import annotations

import json
import re

from sagemaker_serving.config.body_formats import (
    ACCEPT_TYPES,
    DEFAULT_TYPE,
    MAX_ECHO,
    QVALUE_PATTERN,
    SUPPORTED,
)
from sagemaker_serving.formats.errors import PayloadError

__all__ = ["client_text", "media_params", "media_type", "negotiate"]

_QVALUE = re.compile(QVALUE_PATTERN)


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
    text = media_params(entry).get("q")
    if text is None:
        return 1.0
    q = float(text) if _QVALUE.fullmatch(text) else 0.0
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
        return DEFAULT_TYPE
    ranked: dict[str, tuple[int, float, int]] = {}  # type -> (specificity, q, range index)
    for index, entry in enumerate(accept.split(",")):
        range_type = media_type(entry)
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
