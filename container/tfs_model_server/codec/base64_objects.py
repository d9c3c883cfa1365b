"""{"b64": "..."} objects: binary values in TF Serving's JSON, decoded as absl does."""

from __future__ import annotations

import binascii
import re
from typing import Any

from tfs_model_server.codec.value_text import value_to_string
from tfs_model_server.errors import invalid_argument


def is_b64_object(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _b64decode(text: str) -> bytes | None:
    """absl::Base64Unescape(): whitespace ignored, padding optional ('=' or '.')."""
    data = re.sub(r"[ \t\n\v\f\r]", "", text)
    body = data.rstrip("=.")
    pad = len(data) - len(body)
    if not body.isascii() or re.search(r"[^A-Za-z0-9+/]", body) or len(body) % 4 == 1:
        return None
    if pad and pad != (-len(body)) % 4:
        return None
    try:
        return binascii.a2b_base64(body + "=" * ((-len(body)) % 4))
    except binascii.Error:
        return None


def decode_b64_object(value: Any) -> bytes:
    """JsonDecodeBase64Object()."""
    if not is_b64_object(value):
        raise invalid_argument(
            f"JSON Value: {value_to_string(value)} not formatted correctly for base64 data"
        )
    decoded = _b64decode(value["b64"])
    if decoded is None:
        raise invalid_argument("Unable to base64 decode")
    return decoded
