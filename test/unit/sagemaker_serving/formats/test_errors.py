"""sagemaker_serving.formats.errors: PayloadError is a StatusError and a ValueError."""

from __future__ import annotations

from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.errors import PayloadError


def test_payload_error_fields():
    err = PayloadError("nope", 415)
    assert isinstance(err, ValueError) and isinstance(err, StatusError)
    assert (err.status, err.message, str(err)) == (415, "nope", "nope")
