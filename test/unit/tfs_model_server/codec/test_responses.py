"""responses: predict, classify, regress and error bodies as TF Serving writes them.

Layouts are also checked against a small, independent emulation of rapidjson's PrettyWriter
driven the way json_tensor.cc drives it (_ReferenceWriter, _reference_predict).
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfs_rest_json
from tfs_model_server.codec.responses import (
    classify_response,
    error_body,
    predict_response,
    regress_response,
)
from tfs_model_server.errors import Code, ServingError

F32 = np.float32


def _error(call, *args) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value


# ----------------------------------------------------------------- reference writer


class _ReferenceWriter:
    """rapidjson::PrettyWriter (4-space indent) with its kFormatSingleLineArray option."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.levels: list[list] = []  # [in_array, value_count]
        self.single_line = False

    def _prefix(self) -> None:
        if not self.levels:
            return
        level = self.levels[-1]
        indent = "    " * len(self.levels)
        if level[0]:
            if level[1]:
                self.out.append(", " if self.single_line else ",")
            if not self.single_line:
                self.out.append("\n" + indent)
        else:
            if level[1]:
                self.out.append(",\n" if level[1] % 2 == 0 else ": ")
            else:
                self.out.append("\n")
            if level[1] % 2 == 0:
                self.out.append(indent)
        level[1] += 1

    def value(self, text: str) -> None:
        self._prefix()
        self.out.append(text)

    def string(self, data: bytes) -> None:
        escaped = []
        for byte in data:
            char = chr(byte)
            if char in '"\\':
                escaped.append("\\" + char)
            elif byte < 0x20:
                short = {8: "b", 9: "t", 10: "n", 12: "f", 13: "r"}.get(byte)
                escaped.append("\\" + short if short else f"\\u{byte:04X}")
            else:
                escaped.append(bytes([byte]).decode("latin-1"))
        # Non-ASCII bytes are copied through unchanged.
        text = "".join(escaped).encode("latin-1").decode("utf-8", "surrogateescape")
        self.value('"' + text + '"')

    def start(self, array: bool) -> None:
        self._prefix()
        self.out.append("[" if array else "{")
        self.levels.append([array, 0])

    def end(self) -> None:
        array, count = self.levels.pop()
        if count and not (array and self.single_line):
            self.out.append("\n" + "    " * len(self.levels))
        self.out.append("]" if array else "}")

    def text(self) -> str:
        return "".join(self.out)


def _reference_value(writer: _ReferenceWriter, value, dtype, as_b64: bool) -> None:
    if dtype in (np.float32, np.float64):
        writer.value(tfs_rest_json.decimal(float(value), dtype == np.float32))
    elif dtype == np.bool_:
        writer.value("true" if value else "false")
    elif dtype.kind == "O":
        data = value.encode() if isinstance(value, str) else bytes(value)
        if as_b64:
            writer.start(False)
            writer.string(b"b64")
            writer.string(base64.b64encode(data))
            writer.end()
        else:
            writer.string(data)
    else:
        writer.value(str(int(value)))


def _reference_values(writer, array: np.ndarray, as_b64: bool) -> None:
    """AddTensorValues() on a sub-array."""
    if array.ndim == 0:
        _reference_value(writer, array[()], array.dtype, as_b64)
        return
    writer.start(True)
    for index in range(array.shape[0]):
        _reference_values(writer, array[index, ...], as_b64)
    writer.end()


def _reference_predict(outputs: dict[str, np.ndarray], row: bool) -> bytes:
    writer = _ReferenceWriter()
    names = sorted(outputs)
    objects = len(names) > 1
    writer.start(False)
    writer.string(b"predictions" if row else b"outputs")
    if row:
        writer.start(True)
        for item in range(outputs[names[0]].shape[0]):
            if objects:
                writer.start(False)
            writer.single_line = True
            for name in names:
                if objects:
                    writer.string(name.encode())
                _reference_values(writer, outputs[name][item, ...], name.endswith("_bytes"))
            writer.single_line = False
            if objects:
                writer.end()
        writer.end()
    else:
        if objects:
            writer.start(False)
        for name in names:
            if objects:
                writer.string(name.encode())
            _reference_values(writer, outputs[name], name.endswith("_bytes"))
        if objects:
            writer.end()
    writer.end()
    return writer.text().encode("utf-8", "surrogateescape")


# ------------------------------------------------------------ predict response layout


def test_single_float_output_row_format():
    text = predict_response({"y": F32([2.5, 3.0, 4.5])}, True)
    assert text == b'{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'


def test_from_json_single_tensor():
    tensor = np.array([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]], dtype=np.int32)
    assert predict_response({"int_tensor": tensor}, True) == (
        b'{\n    "predictions": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]\n    ]\n}'
    )
    columnar = predict_response({"int_tensor": tensor}, False).decode()
    assert json.loads(columnar) == {"outputs": tensor.tolist()}
    assert columnar.startswith(
        '{\n    "outputs": [\n        [\n            [\n                1,\n'
    )
    assert columnar.endswith("\n                2\n            ]\n        ]\n    ]\n}")


def test_from_json_single_scalar_tensor():
    tensor = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    assert predict_response({"t": tensor}, True) == (
        b'{\n    "predictions": [1, 2, 3, 4, 5\n    ]\n}'
    )
    assert predict_response({"t": tensor}, False) == (
        b'{\n    "outputs": [\n        1,\n        2,\n        3,\n        4,\n        5\n    ]\n}'
    )


def test_from_json_single_bytes_tensor():
    tensor = np.array([[b"hello", b"world"], [b"tf", b"serving"]], dtype=object)
    text = predict_response({"str_tensor_bytes": tensor}, True).decode()
    assert json.loads(text) == {
        "predictions": [
            [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}],
            [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}],
        ]
    }
    assert text.startswith(
        '{\n    "predictions": [[{\n                "b64": "aGVsbG8="\n            }, {'
    )


def test_from_json_single_float_tensor_six_digit_precision():
    tensor = F32([[9000000, 999999, 0.5], [0.0003, 0.00003, 555557.5]])
    assert predict_response({"float_tensor": tensor}, True) == (
        b'{\n    "predictions": [[9e+06, 999999.0, 0.5], [0.0003, 3e-05, 555557.5]\n    ]\n}'
    )


def test_from_json_single_float_tensor_non_finite():
    tensor = F32([[np.nan, np.inf], [3, -np.inf]])
    assert predict_response({"float_tensor": tensor}, True) == (
        b'{\n    "predictions": [[NaN, Infinity], [3.0, -Infinity]\n    ]\n}'
    )


def _multiple_named_tensors() -> dict[str, np.ndarray]:
    return {
        "int_tensor": np.arange(12, dtype=np.int32).reshape(2, 3, 2),
        "str_tensor": np.array([[b"foo", b"bar"], [b"baz", b"bat"]], dtype=object),
        "float_tensor": F32([[1.0], [2.0]]),
        "double_scalar_tensor": np.array([8.0, 9.0]),
        "str_tensor_bytes": np.array([[b"hello", b"world"], [b"tf", b"serving"]], dtype=object),
    }


def test_from_json_multiple_named_tensors_row():
    text = predict_response(_multiple_named_tensors(), True).decode()
    first = (
        '{\n    "predictions": [\n        {\n            "double_scalar_tensor": 8.0,\n'
        '            "float_tensor": [1.0],\n'
        '            "int_tensor": [[0, 1], [2, 3], [4, 5]],\n'
        '            "str_tensor": ["foo", "bar"],\n'
        '            "str_tensor_bytes": [{\n                    "b64": "aGVsbG8="\n'
        '                }, {\n                    "b64": "d29ybGQ="\n                }]\n'
        "        },\n        {\n"
    )
    assert text.startswith(first)
    assert text.endswith('"b64": "c2VydmluZw=="\n                }]\n        }\n    ]\n}')
    assert json.loads(text)["predictions"][1]["int_tensor"] == [[6, 7], [8, 9], [10, 11]]


def test_from_json_multiple_named_tensors_columnar():
    text = predict_response(_multiple_named_tensors(), False).decode()
    assert text.startswith(
        '{\n    "outputs": {\n        "double_scalar_tensor": [\n            8.0,\n'
        '            9.0\n        ],\n        "float_tensor": [\n            [\n'
        "                1.0\n            ],\n"
    )
    assert json.loads(text)["outputs"]["str_tensor_bytes"] == [
        [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}],
        [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}],
    ]


@pytest.mark.parametrize(
    ("outputs", "row", "expected"),
    [
        ({"y": F32([1.5])}, False, b'{\n    "outputs": [\n        1.5\n    ]\n}'),
        ({"y": F32(2)}, False, b'{\n    "outputs": 2.0\n}'),
        ({"y": np.array(b"x", dtype=object)}, False, b'{\n    "outputs": "x"\n}'),
        (
            {"y_bytes": np.array(b"x", dtype=object)},
            False,
            b'{\n    "outputs": {\n        "b64": "eA=="\n    }\n}',
        ),
        (
            {"a": F32(1), "b": np.array([True, False])},
            False,
            b'{\n    "outputs": {\n        "a": 1.0,\n        "b": [\n            true,\n'
            b"            false\n        ]\n    }\n}",
        ),
        ({"y": np.zeros((0, 2), dtype=F32)}, True, b'{\n    "predictions": []\n}'),
        (
            {"a": np.zeros((0, 1, 2)), "b": np.zeros((0, 3, 4))},
            True,
            b'{\n    "predictions": []\n}',
        ),
        ({"y": np.zeros((2, 0), dtype=np.int32)}, True, b'{\n    "predictions": [[], []\n    ]\n}'),
        (
            {"y": np.zeros((2, 0), dtype=np.int32)},
            False,
            b'{\n    "outputs": [\n        [],\n        []\n    ]\n}',
        ),
        ({"y": np.zeros((0,), dtype=np.int32)}, False, b'{\n    "outputs": []\n}'),
        (
            {"y": np.array([2**63 - 1, -(2**63)], dtype=np.int64)},
            True,
            b'{\n    "predictions": [9223372036854775807, -9223372036854775808\n    ]\n}',
        ),
        (
            {
                "y": np.array([0, 255], dtype=np.uint8),
                "z": np.array([2**64 - 1, 0], dtype=np.uint64),
            },
            True,
            b'{\n    "predictions": [\n        {\n            "y": 0,\n            "z": '
            b'18446744073709551615\n        },\n        {\n            "y": 255,\n            '
            b'"z": 0\n        }\n    ]\n}',
        ),
        (
            {"y": np.array([b"\xff\xfe", b'q"\\\n\x01\x7f'], dtype=object)},
            True,
            b'{\n    "predictions": ["\xff\xfe", "q\\"\\\\\\n\\u0001\x7f"\n    ]\n}',
        ),
        (
            {"y": np.array(["h\u00e9"], dtype=object)},
            True,
            '{\n    "predictions": ["h\u00e9"\n    ]\n}'.encode(),
        ),
    ],
)
def test_predict_response_layouts(outputs, row, expected):
    assert predict_response(outputs, row) == expected
    if all(array.ndim for array in outputs.values()) or not row:
        assert _reference_predict(outputs, row) == expected


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({}, "Cannot convert empty tensor map to JSON"),
        (
            {"tensor": np.array([1, 2], dtype=np.complex64)},
            "Failed to write JSON value for tensor type: complex64",
        ),
        (
            {"tensor": np.array([1], dtype=np.float16)},
            "Failed to write JSON value for tensor type: half",
        ),
        (
            {"tensor": np.array([1], dtype=np.uint16)},
            "Failed to write JSON value for tensor type: uint16",
        ),
        ({"tensor": np.array(1, dtype=np.int32)}, "Tensor name: tensor has no shape information "),
        (
            {"int_tensor": np.zeros((2, 3)), "str_tensor": np.zeros((1, 3))},
            "Tensor name: str_tensor has inconsistent batch size: 1 expecting: 2",
        ),
        (
            {"int_tensor": np.zeros((0, 2)), "str_tensor": np.zeros((1, 2))},
            "Tensor name: str_tensor has inconsistent batch size: 1 expecting: 0",
        ),
    ],
)
def test_predict_response_errors(outputs, message):
    err = _error(predict_response, outputs, True)
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message == message


def test_unsupported_dtype_without_values_is_written():
    outputs = {"tensor": np.zeros((0,), dtype=np.float16)}
    assert predict_response(outputs, False) == b'{\n    "outputs": []\n}'


_DTYPES = [F32, np.float64, np.int32, np.int64, np.uint8, np.bool_, object]


@st.composite
def _outputs(draw, row: bool):
    count = draw(st.integers(1, 3))
    batch = draw(st.integers(1, 3))
    outputs = {}
    for index in range(count):
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
        if row:
            shape = (batch, *shape)
        dtype = draw(st.sampled_from(_DTYPES))
        name = draw(st.sampled_from(["out", "y", "x_bytes", 'q"\u00e9'])) + str(index)
        if dtype is object:
            values = draw(
                st.lists(
                    st.binary(max_size=5), min_size=math.prod(shape), max_size=math.prod(shape)
                )
            )
            array = np.empty(math.prod(shape), dtype=object)
            array[:] = values
            array = array.reshape(shape)
        else:
            array = draw(hnp.arrays(dtype, shape))
        outputs[name + ("_bytes" if dtype is object and index % 2 else "")] = array
    return outputs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda row: st.tuples(st.just(row), _outputs(row))))
def test_predict_response_matches_reference_writer(case):
    row, outputs = case
    with np.errstate(invalid="ignore", over="ignore"):
        assert predict_response(outputs, row) == _reference_predict(outputs, row)


# ----------------------------------------------------------- classify / regress results


def test_json_from_classification_result():
    results = [
        [(b"car", 0.2), (b"bike", 0.7), (b"bus", 0.1)],
        [(b"car", 0.7), (b"bike", 0.1), (b"bus", 0.2)],
    ]
    assert classify_response(results) == (
        b'{\n    "results": [[["car", 0.2], ["bike", 0.7], ["bus", 0.1]], '
        b'[["car", 0.7], ["bike", 0.1], ["bus", 0.2]]\n    ]\n}'
    )


def test_classification_result_with_empty_label_and_no_classes():
    assert classify_response([[(b"", 1.0)], []]) == (
        b'{\n    "results": [[["", 1.0]], []\n    ]\n}'
    )


def test_json_from_regression_result():
    assert regress_response([0.2, 0.9, 1.0]) == (b'{\n    "results": [0.2, 0.9, 1.0]\n}')
    assert regress_response([0.2, math.inf, 1.0, -math.inf, math.nan]) == (
        b'{\n    "results": [0.2, Infinity, 1.0, -Infinity, NaN]\n}'
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (classify_response, "Cannot convert empty ClassificationResults to JSON"),
        (regress_response, "Cannot convert empty RegressionResults to JSON"),
    ],
)
def test_json_from_result_errors(call, message):
    assert _error(call, []).message == message


@pytest.mark.parametrize(
    ("message", "body"),
    [
        ('Bad key: "key"', b'{\n    "error": "Bad key: \\"key\\""\n}'),
        ("Bad key: 'key'", b'{\n    "error": "Bad key: \'key\'"\n}'),
        ("tab\there\x1f", b'{\n    "error": "tab\\there\\u001F"\n}'),
    ],
)
def test_make_json_from_status(message, body):
    assert error_body(message) == body


def test_an_error_body_is_cut_at_its_limit() -> None:
    from tfs_model_server.codec.responses import MAX_ERROR_CHARS, error_body

    body = json.loads(error_body("x" * (1 << 20)))
    assert body["error"].startswith("x" * MAX_ERROR_CHARS + "... (")
    assert len(body["error"]) < MAX_ERROR_CHARS + 40
