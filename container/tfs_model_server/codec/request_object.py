"""The checks every JSON request body gets first: an object, with a string signature_name."""

from __future__ import annotations

from typing import Any

from tfs_model_server.codec.value_text import value_to_string
from tfs_model_server.errors import ServingError, invalid_argument

DEFAULT_SIGNATURE = "serving_default"


def format_error(value: Any, text: str) -> ServingError:
    """INVALID_ARGUMENT: the JSON value as TF Serving prints it, then `text`."""
    return invalid_argument(f"JSON Value: {value_to_string(value)} {text}")


def request_object(doc: Any) -> dict:
    """ParseJson()'s top-level check and FillSignature()'s type check."""
    if not isinstance(doc, dict):
        raise format_error(doc, "Is not object")
    if "signature_name" in doc and not isinstance(doc["signature_name"], str):
        raise format_error(
            doc, "not formatted correctly. 'signature_name' key must be a string value."
        )
    return doc


def predict_signature_name(doc: Any) -> str:
    """The request's signature_name ('serving_default' when absent or empty)."""
    return request_object(doc).get("signature_name") or DEFAULT_SIGNATURE
