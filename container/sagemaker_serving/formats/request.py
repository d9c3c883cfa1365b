"""A client payload as a TF Serving REST request (predict, classify, regress): the decoder of
its Content-Type, by the same rules as the njs fast path (nginx/tfs.js; the cases are in
test/support/format_cases.py). Bare NaN/Infinity/-Infinity tokens are accepted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from sagemaker_serving.config.body_formats import (
    BYTES_TYPES,
    CSV,
    JSON_LINES_TYPES,
    JSON_TYPES,
    NPY,
    TFEXAMPLE_TYPES,
)
from sagemaker_serving.config.routing_rules import EXPECTED, METHOD, METHODS
from sagemaker_serving.formats.csv_rows import decode_csv
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.json_bodies import decode_json, decode_json_lines
from sagemaker_serving.formats.media import media_params, media_type
from sagemaker_serving.formats.npy import decode_npy
from sagemaker_serving.formats.raw_bytes import decode_bytes
from sagemaker_serving.formats.request_body import ModelRequest
from sagemaker_serving.formats.signature import InputSpec
from sagemaker_serving.formats.tfexample import decode_tfexample

__all__ = ["ModelRequest", "client_bytes", "decode_request"]


def decode_request(
    body: bytes,
    content_type: str,
    inputs: Mapping[str, InputSpec] | None,
    method: str = "predict",
) -> ModelRequest:
    """Turn a client payload into a TF Serving REST request body for `method`.

    `inputs` (signature's) steers the binary formats; None means unknown.
    Raises PayloadError (400 bad payload, 415 unsupported type or no fitting model input).
    """
    if method not in METHODS:
        raise PayloadError(f"Unsupported method: {method} (expected {EXPECTED[METHOD]})", 400)
    ctype = media_type(content_type)
    with client_bytes(content_type):
        if ctype in JSON_TYPES:
            return decode_json(body, method)
        if ctype in JSON_LINES_TYPES:
            return decode_json_lines(body, method)
        if ctype == CSV:
            params = media_params(content_type)
            header = params.get("header", "").lower() == "present"
            return decode_csv(body, params.get("charset", "utf-8"), header, method)
        if ctype in BYTES_TYPES:
            return decode_bytes(body, ctype, inputs)
        if ctype == NPY:
            return decode_npy(body, inputs)
        if ctype in TFEXAMPLE_TYPES:
            return decode_tfexample(body, inputs, method)
        raise PayloadError(f"Unsupported Media Type: {content_type or 'Unknown'}", 415)


@contextlib.contextmanager
def client_bytes(content_type: str | None) -> Iterator[None]:
    """Whatever a decoder raises on the client's bytes is a 400 (a corrupt .npz, an invalid
    code point in a `<U` array, JSON nested too deeply...), never a 500."""
    try:
        yield
    except (PayloadError, MemoryError):
        raise
    except Exception as err:
        what = media_type(content_type) or "request"
        raise PayloadError(
            f"Could not decode the {what} body: {type(err).__name__}: {err}", 400
        ) from None
