"""sagemaker_serving.formats.request: the decoder of each Content-Type, and whatever a decoder
raises on the client's bytes is a 400."""

from __future__ import annotations

import io

import numpy as np
import pytest

from format_helpers import decode_error, npy, spec, specs
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request import client_bytes


@pytest.mark.parametrize("ctype", ["image/png", "application/xml", "", "text/plain"])
def test_unsupported_media_type_415(ctype):
    err = decode_error(b"x", ctype, None)
    assert err.status == 415
    assert err.message.startswith("Unsupported Media Type: ")


def test_unknown_method_400():
    assert decode_error(b"[1]", "application/json", None, method="explain").status == 400


def corrupt_npz() -> bytes:
    """A .npz whose member's data no longer matches its CRC-32."""
    out = io.BytesIO()
    np.savez(out, x=np.arange(8.0))
    body = bytearray(out.getvalue())
    body[60:80] = b"\xff" * 20
    return bytes(body)


def bad_code_point_npy(code_point: int) -> bytes:
    """A `<U1` array holding a code point no str can hold (or a lone surrogate)."""
    body = bytearray(npy(np.array(["a"], dtype="<U1")))
    body[-4:] = code_point.to_bytes(4, "little")
    return bytes(body)


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (corrupt_npz(), "application/x-npy"),
        (bad_code_point_npy(0x110000), "application/x-npy"),
        (bad_code_point_npy(0xD800), "application/x-npy"),
        (DEEP_JSON, "application/json"),
        (DEEP_JSON + b"\n" + DEEP_JSON, "application/json"),
        (DEEP_JSON, "application/jsonlines"),
    ],
)
def test_whatever_a_decoder_raises_on_client_bytes_is_400(body, content_type):
    err = decode_error(body, content_type, specs(spec("x")))
    assert err.status == 400, err.message


def test_client_bytes_names_the_media_type_and_the_error():
    with pytest.raises(PayloadError) as info, client_bytes("Application/X-NPY; v=1"):
        raise KeyError("k")
    assert (info.value.status, info.value.message) == (
        400,
        "Could not decode the application/x-npy body: KeyError: 'k'",
    )


def test_client_bytes_lets_payload_and_memory_errors_through():
    with pytest.raises(PayloadError) as info, client_bytes(None):
        raise PayloadError("as it was", 415)
    assert info.value.message == "as it was"
    with pytest.raises(MemoryError), client_bytes(None):
        raise MemoryError
