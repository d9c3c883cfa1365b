"""codec.value_text: JSON values as TF Serving's error messages print them."""

from __future__ import annotations

import math

import pytest

from tfs_model_server.codec.value_text import json_type, value_to_string


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (16777217.0, "16777217.0"),  # a double, as Writer::Double() writes it
        (1e300, "1e300"),
        (5, "5"),
        (True, "true"),
        (None, "null"),
        ('a"b', '"a\\"b"'),
        ([1, [2.5]], "[1, [2.5]]"),  # kFormatSingleLineArray
        ([{"a": 1}, []], '[{\n        "a": 1\n    }, []]'),
        ({"a": {}}, '{\n    "a": {}\n}'),
        ([1, math.nan, 2], "[1, "),  # rapidjson's writer stops at NaN
        (math.inf, ""),
    ],
)
def test_value_to_string(value, text) -> None:
    assert value_to_string(value) == text


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "Null"),
        (True, "True"),
        (False, "False"),
        ({}, "Object"),
        ([], "Array"),
        ("", "String"),
        (1, "Number"),
        (1.5, "Number"),
    ],
)
def test_json_type(value, name) -> None:
    assert json_type(value) == name


def test_a_long_string_is_cut() -> None:
    """TF Serving writes a string value whole; a 4 MiB one is not echoed back here."""
    text = value_to_string({"instances": ["a" * (4 << 20)]})
    assert text.startswith('{\n    "instances": ["aaa') and text.endswith("...")
    assert len(text) < 600
