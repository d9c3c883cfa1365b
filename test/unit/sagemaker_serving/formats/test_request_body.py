"""sagemaker_serving.formats.request_body: the JSON pieces of a TF Serving request body."""

from __future__ import annotations

import math

import pytest

from sagemaker_serving.formats.request_body import (
    batch_key,
    dumps,
    json_key,
    loads,
    strip_bom,
    wrap,
)


def test_loads_says_whether_bare_nonfinite_tokens_occurred():
    assert loads(b"[1, 2.5]") == ([1, 2.5], False)
    value, nonfinite = loads(b"[NaN, Infinity, -Infinity]")
    assert nonfinite and math.isnan(value[0]) and value[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("body", [b"[1, nan]", b"{", b"[Infinity"])
def test_loads_refuses_what_is_not_json(body):
    with pytest.raises(ValueError):
        loads(body)


def test_loads_refuses_json_nested_too_deeply():
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(b"[" * 100_000 + b"NaN" + b"]" * 100_000)


def test_dumps_is_compact_and_writes_nonfinite_as_bare_tokens():
    assert dumps({"a": [1, 2.5, "é"]}) == '{"a":[1,2.5,"é"]}'.encode()
    assert dumps([math.nan, -math.inf], nonfinite=True) == b"[NaN,-Infinity]"
    assert dumps([2**70]) == b"[1180591620717411303424]"  # beyond 64 bits


def test_wrap_key_and_batch_key():
    assert wrap("instances", b"[1]") == b'{"instances":[1]}'
    assert json_key('a"b') == b'"a\\"b"'
    assert [batch_key(m) for m in ("predict", "classify", "regress")] == [
        "instances",
        "examples",
        "examples",
    ]


def test_strip_bom():
    assert strip_bom(b"\xef\xbb\xbf[1]") == b"[1]"
    assert strip_bom(b"[1]") == b"[1]"
