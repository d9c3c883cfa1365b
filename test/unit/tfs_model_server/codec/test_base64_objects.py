"""codec.base64_objects: {"b64": ...} values decoded as absl::Base64Unescape does."""

from __future__ import annotations

import pytest

from tfs_model_server.codec.base64_objects import decode_b64_object, is_b64_object
from tfs_model_server.errors import ServingError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b64": "aGVsbG8="}, True),
        ({"b64": 5}, False),
        ({"b64": "aGVsbG8=", "x": 1}, False),
        ("aGVsbG8=", False),
    ],
)
def test_is_b64_object(value, expected) -> None:
    assert is_b64_object(value) is expected


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("aGVsbG8=", b"hello"),
        ("aGVsbG8", b"hello"),  # padding is optional
        ("aGVs bG8\n=", b"hello"),  # whitespace is ignored
        ("aGVsbG8.", b"hello"),  # '.' pads as '=' does
        ("", b""),
    ],
)
def test_decodes_what_absl_decodes(text: str, data: bytes) -> None:
    assert decode_b64_object({"b64": text}) == data


@pytest.mark.parametrize("text", ["aGVsbG8==", "a", "aGV$bG8=", "héllo"])
def test_refuses_what_absl_refuses(text: str) -> None:
    with pytest.raises(ServingError, match=r"^Unable to base64 decode$"):
        decode_b64_object({"b64": text})


def test_an_object_that_is_no_b64_object() -> None:
    with pytest.raises(ServingError) as info:
        decode_b64_object({"b64": "eA==", "more": 1})
    assert info.value.message.endswith(" not formatted correctly for base64 data")
