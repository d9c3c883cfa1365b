"""json_reader: what rapidjson (as TF Serving configures it) accepts, and its errors."""

from __future__ import annotations

import math

import pytest

from tfs_model_server.codec.json_reader import loads
from tfs_model_server.errors import Code, ServingError


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "JSON Parse error: The document is empty"),
        ("   ", "JSON Parse error: The document is empty. at offset: 3"),
        ("{not json", "JSON Parse error: Missing a name for object member. at offset: 1"),
        (
            '{"a": [1, 2}',
            "JSON Parse error: Missing a comma or ']' after an array element. at offset: 11",
        ),
        ('{"a": tru}', "JSON Parse error: Invalid value. at offset: 9"),
        (
            '{"a": 1e999}',
            "JSON Parse error: Number too big to be stored in double. at offset: 6",
        ),
        (
            '{"a": ' + "1" * 4301 + "}",  # beyond int() (4300 digits) and a double
            "JSON Parse error: Number too big to be stored in double. at offset: 6",
        ),
        (
            '{"a": ' + "1" * 400 + "}",  # beyond a double: refused, as rapidjson does
            "JSON Parse error: Number too big to be stored in double. at offset: 6",
        ),
        (
            '{"a": 1e' + "1" * 5000 + "}",
            "JSON Parse error: Number too big to be stored in double. at offset: 6",
        ),
        (
            '{"a": "\\ud800"}',
            "JSON Parse error: The surrogate pair in string is invalid. at offset: 7",
        ),
    ],
)
def test_parse_errors_name_the_reason_and_the_offset(body, message):
    with pytest.raises(ServingError) as info:
        loads(body)
    assert info.value.code == Code.INVALID_ARGUMENT
    assert info.value.message == message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"a": NaN, "b": Infinity, "c": -Infinity}', {"a": "nan", "b": "inf", "c": "-inf"}),
        (b'{"a": Inf, "b": -Inf}', {"a": "inf", "b": "-inf"}),
        (b'{"a": 1} trailing bytes', {"a": 1}),  # kParseStopWhenDoneFlag
        (b'\xef\xbb\xbf{"a": 1}', {"a": 1}),  # a UTF-8 byte order mark is skipped
        (b'{"a": 18446744073709551615}', {"a": 18446744073709551615}),
        (b'{"a": 18446744073709551616}', {"a": 1.8446744073709552e19}),
        (b'{"a": 1e-' + b"1" * 5000 + b"}", {"a": 0.0}),
        (b'{"a": 1e00000000000000000000000001}', {"a": 10.0}),
        (b'{"a": ' + b"1" * 25 + b', "b": NaN}', {"a": 1.1111111111111111e24, "b": "nan"}),
        (b'{"a": ' + b"1" * 25 + b', "b": "\\ud83d\\ude00"}', {"a": 1.1111111111111111e24}),
        (b'{"a": "\xff\xfe"}', {"a": b"\xff\xfe".decode("utf-8", "surrogateescape")}),
    ],
)
def test_loads_accepts_what_rapidjson_accepts(body, expected):
    doc = loads(body)
    normalise = {
        "nan": math.isnan,
        "inf": lambda v: v == math.inf,
        "-inf": lambda v: v == -math.inf,
    }
    for key, value in expected.items():
        if isinstance(value, str) and value in normalise:
            assert normalise[value](doc[key])
        else:
            assert doc[key] == value
            assert type(doc[key]) is type(value)
