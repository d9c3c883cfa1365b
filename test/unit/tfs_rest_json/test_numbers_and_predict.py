"""tfs_rest_json: TF Serving's number text (WriteDecimal), scalar and vectorised."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfs_rest_json
from tfs_rest_json import numbers as number_text
from tfs_rest_json.numbers import SCALAR_MAX

F32 = np.float32


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (9000000, "9e+06"),
        (999999, "999999.0"),
        (0.5, "0.5"),
        (0.0003, "0.0003"),
        (0.00003, "3e-05"),
        (555557.5, "555557.5"),
        (3, "3.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (1 / 3, "0.333333343"),
        (100000, "100000.0"),
        (1e6, "1e+06"),
        (1e10, "1e+10"),
        (123456789, "123456792.0"),
        (16777216, "16777216.0"),
        (1234565, "1234565.0"),
        (2**-13, "0.000122070312"),
        (1e-45, "1.4013e-45"),
        (3e-45, "2.8026e-45"),
        (1.1754942e-38, "1.17549421e-38"),
        (1.17549435e-38, "1.17549435e-38"),
        (3.4028235e38, "3.40282347e+38"),
        (-3.4028235e38, "-3.40282347e+38"),
        (0.0001, "0.0001"),
        (0.000123456789, "0.00012345679"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_float32_write_decimal(value, text):
    assert tfs_rest_json.float32_text(np.array([value], dtype=F32), 1, "") == [text]
    assert tfs_rest_json.decimal(float(F32(value)), True) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.1, "0.1"),
        (1 / 3, "0.33333333333333331"),
        (123456789.123, "123456789.123"),
        (0.5, "0.5"),
        (3.0, "3.0"),
        (1e300, "1e+300"),
        (123456789.0, "123456789.0"),
        (2**60, "1.152921504606847e+18"),
        (-0.0, "-0.0"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
    ],
)
def test_float64_write_decimal(value, text):
    assert tfs_rest_json.float64_tokens(np.array([value])) == [text]


_EDGE_FLOATS = np.array(
    [float(f"1e{k}") for k in range(-45, 39)] + [2.0**k for k in range(-149, 128)], dtype=F32
)


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).standard_normal(20000).astype(F32),
        (np.random.default_rng(2).integers(-(10**6), 10**6, 20000) / 1000).astype(F32),
        (np.random.default_rng(3).integers(-(10**7), 10**7, 20000) / 8).astype(F32),
        np.random.default_rng(4)
        .integers(0, 2**32, 50000, dtype=np.uint64)
        .astype(np.uint32)
        .view(F32),
        np.concatenate([_EDGE_FLOATS, np.nextafter(_EDGE_FLOATS, F32(np.inf))]).astype(F32),
        np.concatenate([_EDGE_FLOATS, np.nextafter(_EDGE_FLOATS, F32(0))]).astype(F32) * -1,
    ],
    ids=["normal", "thousandths", "eighths", "bit-patterns", "powers-up", "powers-down"],
)
def test_float32_vectorised_matches_per_value(values):
    with np.errstate(invalid="ignore"):
        expected = [tfs_rest_json.decimal(v, True) for v in values.astype(np.float64).tolist()]
    assert tfs_rest_json.float32_text(values, 1, "") == expected


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(5).standard_normal(20000),
        np.random.default_rng(6).integers(0, 2**64, 50000, dtype=np.uint64).view(np.float64),
        np.random.default_rng(7).integers(-(10**7), 10**7, 20000) / 1000,
        np.random.default_rng(8).integers(-(10**18), 10**18, 20000).astype(np.float64),
        np.array([float(f"1e{k}") for k in range(-323, 309)] + [5e-324, 1.7976931348623157e308]),
    ],
    ids=["normal", "bit-patterns", "thousandths", "integers", "powers"],
)
def test_float64_vectorised_matches_per_value(values):
    expected = [tfs_rest_json.decimal(v, False) for v in values.tolist()]
    assert tfs_rest_json.float64_tokens(values) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=50))
def test_float32_any_bit_pattern(bit_patterns):
    values = np.array(bit_patterns, dtype=np.uint32).view(F32)
    with np.errstate(invalid="ignore"):
        expected = [tfs_rest_json.decimal(v, True) for v in values.astype(np.float64).tolist()]
    assert tfs_rest_json.float32_text(values, len(values), ", ") == [", ".join(expected)]


@pytest.mark.parametrize("chunk", [1, 2, 7])
@pytest.mark.parametrize("shape", [(8,), (20,), (2, 8), (4, 7), (3, 15), (5, 3, 4)])
@pytest.mark.parametrize("row", [True, False])
def test_float32_chunks_give_the_same_text(monkeypatch, chunk, shape, row):
    array = np.random.default_rng(9).standard_normal(shape).astype(F32)
    expected = tfs_rest_json.predict_response({"y": array}, row)
    monkeypatch.setattr(number_text, "SCALAR_MAX", 0)  # every size through the tables
    monkeypatch.setattr(number_text, "_CHUNK", chunk)
    assert tfs_rest_json.predict_response({"y": array}, row) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=SCALAR_MAX + 2),
    st.integers(1, 8),
)
def test_float32_small_vectors_per_value_give_the_tables_text(bit_patterns, group):
    values = np.array(bit_patterns, dtype=np.uint32).view(F32)
    group = min(group, values.size)
    with np.errstate(invalid="ignore"):
        tables = tfs_rest_json.float32_text(values, group, ", ")
    assert tfs_rest_json.float32_joined(values, group, ", ") == tables


def test_float32_small_vectors_skip_the_tables(monkeypatch):
    """Up to SCALAR_MAX values are written by decimal() alone (the tables' fixed cost is
    ~0.1 ms), past it by the tables."""
    calls = []
    table_text = tfs_rest_json.float32_text
    monkeypatch.setattr(
        number_text, "float32_text", lambda *a: calls.append(a[0].size) or table_text(*a)
    )
    small = np.arange(SCALAR_MAX, dtype=F32) / 3
    large = np.arange(SCALAR_MAX + 1, dtype=F32) / 3
    assert tfs_rest_json.float32_joined(small, 4, ",") == table_text(small, 4, ",")
    assert calls == []
    assert tfs_rest_json.float32_joined(large, 5, ",") == table_text(large, 5, ",")
    assert calls == [large.size]
    assert tfs_rest_json.float32_joined(np.zeros(0, dtype=F32), 3, ",") == []  # no groups


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        F32,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
        elements=st.floats(width=32, allow_nan=True, allow_infinity=True),
    ),
    st.booleans(),
)
def test_predict_response_parses_back_to_the_same_float32(array, row):
    text = tfs_rest_json.predict_response({"y": array}, row)
    parsed = json.loads(text)["predictions" if row else "outputs"]
    np.testing.assert_array_equal(np.array(parsed, dtype=F32), array)
