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
        (16777217.0, "16777216.0"),  # within float range: printed as its float32
        (1e300, "1e+300"),
        (5, "5"),
        (True, "true"),
        (None, "null"),
        ('a"b', '"a\\"b"'),
        ([1, [2.5]], "[\n    1,\n    [\n        2.5\n    ]\n]"),
        ({"a": {}}, '{\n    "a": {}\n}'),
        ([1, math.nan, 2], "[\n    1,\n    "),  # rapidjson's writer stops at NaN
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
