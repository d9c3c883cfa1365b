"""application/x-image and application/octet-stream bodies: the bytes, base64, as the one
instance of the model's one DT_STRING input."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request_body import ModelRequest, json_key, wrap
from sagemaker_serving.formats.signature import InputSpec, single_string_input, string_inputs

__all__ = ["decode_bytes"]


def decode_bytes(body: bytes, ctype: str, inputs: Mapping[str, InputSpec] | None) -> ModelRequest:
    """The body for the signature's DT_STRING input (with `inputs` None: the only input).
    Raises PayloadError 415 when the signature has no such input, or several."""
    if not body:
        raise PayloadError(f"Empty request body for {ctype}", 400)
    b64 = b'{"b64":"' + base64.b64encode(body) + b'"}'
    if inputs is None or single_string_input(inputs) is not None:
        return ModelRequest(wrap("instances", b"[" + b64 + b"]"), 1)
    strings = string_inputs(inputs)
    if len(strings) == 1:  # one of several inputs
        return ModelRequest(wrap("instances", b"[{" + json_key(strings[0]) + b":" + b64 + b"}]"), 1)
    described = ", ".join(f"{name} ({spec.dtype})" for name, spec in inputs.items()) or "none"
    problem = (
        "has no DT_STRING input to take the raw bytes"
        if not strings
        else f"has several DT_STRING inputs ({', '.join(strings)}), so which one takes the bytes "
        "is ambiguous"
    )
    raise PayloadError(
        f"Unsupported Media Type: {ctype}: the model's signature {problem} (inputs: {described}). "
        "Send JSON, or add a code/inference.py that converts the payload.",
        415,
    )
