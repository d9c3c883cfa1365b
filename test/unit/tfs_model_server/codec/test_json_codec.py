"""Unit tests of json_codec against TF Serving's REST JSON behaviour.

Cases ported from tensorflow_serving/util/json_tensor_test.cc keep the test names there.
Layouts are also checked against a small, independent emulation of rapidjson's PrettyWriter
driven the way json_tensor.cc drives it (_ReferenceWriter, _reference_predict).
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

import tfs_rest_json
from tfs_model_server.codec import json_codec
from tfs_model_server.core.errors import Code, ServingError
from tfs_model_server.core.tensor_spec import TensorSpec

F32 = np.float32


def _specs(**dtypes: int) -> dict[str, TensorSpec]:
    return {name: TensorSpec(name, f"{name}:0", dtype, None) for name, dtype in dtypes.items()}


def _error(call, *args) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value


def _predict(body: str | bytes, specs: dict[str, TensorSpec]):
    return json_codec.predict_inputs(json_codec.loads(body), specs)


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


# ------------------------------------------------------------------- request parsing


def test_single_unnamed_tensor():
    inputs, row = _predict('{"instances": [[1,2],[3,4],[5,6]]}', _specs(default=types_pb2.DT_INT32))
    assert row is True
    np.testing.assert_array_equal(inputs["default"], [[1, 2], [3, 4], [5, 6]])
    assert inputs["default"].dtype == np.int32


@pytest.mark.parametrize(
    ("dtype", "body", "expected"),
    [
        (types_pb2.DT_FLOAT, "[1, 2.0, 3, 4, 5.003, 0.007, 0.0]", [1, 2, 3, 4, 5.003, 0.007, 0]),
        (types_pb2.DT_DOUBLE, "[1.0, 2, 3, 4, 0.662, 0, 0.0]", [1, 2, 3, 4, 0.662, 0, 0]),
    ],
)
def test_mixed_input_for_decimal_tensor(dtype, body, expected):
    inputs, _ = _predict('{"instances": ' + body + "}", _specs(default=dtype))
    np_dtype = np.float32 if dtype == types_pb2.DT_FLOAT else np.float64
    np.testing.assert_array_equal(inputs["default"], np.array(expected, dtype=np_dtype))
    assert inputs["default"].dtype == np_dtype


def test_single_unnamed_tensor_with_signature():
    doc = json_codec.loads('{"signature_name": "predict_images", "instances": [[1,2]]}')
    assert json_codec.predict_signature_name(doc) == "predict_images"
    inputs, _ = json_codec.predict_inputs(doc, _specs(default=types_pb2.DT_INT32))
    np.testing.assert_array_equal(inputs["default"], [[1, 2]])


@pytest.mark.parametrize("doc", [{}, {"signature_name": ""}, {"instances": [1]}])
def test_default_signature_name(doc):
    assert json_codec.predict_signature_name(doc) == "serving_default"


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        ('{"instances": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}]}', (2,)),
        ('{"instances": [[{"b64": "aGVsbG8="}], [{"b64": "d29ybGQ="}]]}', (2, 1)),
        ('{"instances": [{"default": [[{"b64": "aGVsbG8="}], [{"b64": "d29ybGQ="}]]}]}', (1, 2, 1)),
        ('{"instances": ["hello", "world"]}', (2,)),
    ],
)
def test_base64_and_string_inputs(body, shape):
    inputs, _ = _predict(body, _specs(default=types_pb2.DT_STRING))
    assert inputs["default"].shape == shape
    assert inputs["default"].reshape(-1).tolist() == [b"hello", b"world"]


def test_multiple_named_tensor():
    body = """{"instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"],
         "float_tensor": [1.0, NaN], "dbl_tensor": [NaN]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"],
         "float_tensor": [2.0, Infinity], "dbl_tensor": [2.0]}]}"""
    specs = _specs(
        int_tensor=types_pb2.DT_INT32,
        str_tensor=types_pb2.DT_STRING,
        float_tensor=types_pb2.DT_FLOAT,
        dbl_tensor=types_pb2.DT_DOUBLE,
    )
    inputs, row = _predict(body, specs)
    assert row is True
    assert inputs["int_tensor"].shape == (2, 3, 2)
    assert inputs["str_tensor"].tolist() == [[b"foo", b"bar"], [b"baz", b"bat"]]
    np.testing.assert_array_equal(inputs["float_tensor"], F32([[1.0, np.nan], [2.0, np.inf]]))
    assert inputs["float_tensor"].dtype == np.float32
    np.testing.assert_array_equal(inputs["dbl_tensor"], [[np.nan], [2.0]])


def test_single_unnamed_tensor_columnar_format():
    specs = _specs(int_tensor=types_pb2.DT_INT32)
    for body in (
        '{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]]}}',
        '{"inputs": [[[1,2],[3,4],[5,6]]]}',
    ):
        inputs, row = _predict(body, specs)
        assert row is False
        np.testing.assert_array_equal(inputs["int_tensor"], [[[1, 2], [3, 4], [5, 6]]])


def test_multiple_named_tensor_columnar_format():
    body = """{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]], "str_tensor": ["foo", "bar"],
               "bin_tensor": {"b64": "aGVsbG8="}}}"""
    specs = _specs(
        int_tensor=types_pb2.DT_INT32,
        str_tensor=types_pb2.DT_STRING,
        bin_tensor=types_pb2.DT_STRING,
    )
    inputs, _ = _predict(body, specs)
    assert inputs["int_tensor"].shape == (1, 3, 2)
    assert inputs["str_tensor"].tolist() == [b"foo", b"bar"]
    assert inputs["bin_tensor"].shape == ()
    assert inputs["bin_tensor"][()] == b"hello"


@pytest.mark.parametrize(
    ("dtype", "values", "np_dtype"),
    [
        (types_pb2.DT_INT64, "[-9223372036854775808, 9223372036854775807]", np.int64),
        (types_pb2.DT_UINT64, "[0, 18446744073709551615]", np.uint64),
        (types_pb2.DT_UINT32, "[0, 4294967295]", np.uint32),
        (types_pb2.DT_INT8, "[-128, 127]", np.int8),
        (types_pb2.DT_UINT8, "[0, 255]", np.uint8),
        (types_pb2.DT_BOOL, "[true, false]", np.bool_),
    ],
)
def test_integer_and_bool_inputs(dtype, values, np_dtype):
    inputs, _ = _predict('{"instances": ' + values + "}", _specs(x=dtype))
    assert inputs["x"].dtype == np_dtype
    assert inputs["x"].tolist() == json.loads(values)


_ELEMENT_ERROR = "Failed to process element: {} of 'instances' list. Error: INVALID_ARGUMENT: "


def _float_value_error(value: str) -> str:
    return (
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
        f"Cannot convert JSON value: {value} to float without loss of precision."
    )


@pytest.mark.parametrize(
    ("body", "specs", "message"),
    [
        ("", None, "JSON Parse error: The document is empty"),
        ("   ", None, "JSON Parse error: The document is empty. at offset: 3"),
        ("{not json", None, "JSON Parse error: Missing a name for object member. at offset: 1"),
        (
            '{"a": [1, 2}',
            None,
            "JSON Parse error: Missing a comma or ']' after an array element. at offset: 11",
        ),
        ('{"a": tru}', None, "JSON Parse error: Invalid value. at offset: 9"),
        (
            '{"a": 1e999}',
            None,
            "JSON Parse error: Number too big to be stored in double. at offset: 6",
        ),
        (
            '{"a": "\\ud800"}',
            None,
            "JSON Parse error: The surrogate pair in string is invalid. at offset: 7",
        ),
        ("[1, 2]", None, "JSON Value: [\n    1,\n    2\n] Is not object"),
        ('{"foo": 1}', "f", "Missing 'inputs' or 'instances' key"),
        (
            '{"instances": []}',
            "f",
            "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array",
        ),
        (
            '{"instances": 1}',
            "f",
            "JSON Value: {\n    \"instances\": 1\n} Excepting 'instances' to be an list/array",
        ),
        (
            '{"instances": [1], "inputs": [1]}',
            "f",
            'JSON Value: {\n    "instances": [\n        1\n    ],\n    "inputs": [\n        1\n'
            "    ]\n} Not formatted correctly expecting only one of 'inputs' or 'instances' keys "
            "to exist ",
        ),
        (
            '{"signature_name": 5, "instances": [1]}',
            "f",
            'JSON Value: {\n    "signature_name": 5,\n    "instances": [\n        1\n    ]\n} not '
            "formatted correctly. 'signature_name' key must be a string value.",
        ),
        (
            '{"instances": ["a"]}',
            "f",
            _ELEMENT_ERROR.format(0)
            + 'JSON Value: "a" Type: String is not of expected type: float',
        ),
        ('{"instances": [3.5e38]}', "f", _float_value_error("3.5e+38")),
        ('{"instances": [16777217]}', "f", _float_value_error("16777217")),
        (
            '{"instances": [9007199254740993]}',
            "d",
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Cannot convert JSON value: 9007199254740993 to double without loss of precision.",
        ),
        (
            '{"instances": [[1,2],[3,4],[5,6,7]]}',
            "i",
            "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting tensor size: 2 but got: 3",
        ),
        (
            '{"instances": [[1,2],[3,4],[[5,6]]]}',
            "i",
            "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting shape [2] but got: [1,2]",
        ),
        (
            '{"instances": [1, [1]]}',
            "i",
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting shape [] but got: [1]",
        ),
        (
            '{"instances": [[1,2],["a", "b"]]}',
            "i",
            _ELEMENT_ERROR.format(1)
            + 'JSON Value: "a" Type: String is not of expected type: int32',
        ),
        (
            '{"instances": [[1.0]]}',
            "i",
            _ELEMENT_ERROR.format(0)
            + "JSON Value: 1.0 Type: Number is not of expected type: int32",
        ),
        (
            '{"inputs": [[1, 2], [3]]}',
            "i",
            "Encountered list at unexpected size: 1 at level: 1 expected size: 2",
        ),
        (
            '{"inputs": [[1, 2], 3]}',
            "i",
            "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2",
        ),
        ('{"inputs": {"b64": "!!"}}', "s", "Unable to base64 decode"),
    ],
)
def test_predict_request_errors(body, specs, message):
    dtypes = {"f": types_pb2.DT_FLOAT, "d": types_pb2.DT_DOUBLE, "i": types_pb2.DT_INT32}
    dtypes["s"] = types_pb2.DT_STRING
    if specs is None:
        err = _error(lambda: json_codec.predict_inputs(json_codec.loads(body), _specs()))
    else:
        err = _error(_predict, body, _specs(default=dtypes[specs]))
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message == message


def test_unsupported_input_dtype_is_unimplemented():
    err = _error(_predict, '{"inputs": [1.0]}', _specs(x=types_pb2.DT_HALF))
    assert err.code == Code.UNIMPLEMENTED
    assert "Conversion of JSON Value: 1.0 to type: half" in err.message


def test_empty_input_map():
    err = _error(_predict, '{"instances": [1]}', {})
    assert err.message == "Failed to get input map for signature: DEFAULT"


@pytest.mark.parametrize(
    ("instances", "message"),
    [
        (
            '[{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]},'
            ' {"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]',
            "Expecting shape",
        ),
        (
            '[{"int_tensor": [[1,2],[3,4],[5,6],[7,8]], "str_tensor": ["foo", "bar"]},'
            ' {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]',
            "Expecting tensor size",
        ),
        (
            '[{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]}, [1, 20, 30]]',
            "Expecting object but got list at item 1 of input list",
        ),
        (
            '[{"int_tensor": [1]}]',
            "Failed to process element: 0 of 'instances' list. JSON object: {\n    "
            '"int_tensor": [\n        1\n    ]\n} must only have keys: int_tensor,str_tensor',
        ),
        (
            '[{"int_tensor": [1], "str_tensor": ["a"], "other": 1}]',
            "Failed to process element: 0 key: other of 'instances' list. Error: "
            "INVALID_ARGUMENT: JSON object: does not have named input: other",
        ),
        (
            "[[1, 2]]",
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map",
        ),
    ],
)
def test_multiple_named_tensor_errors(instances, message):
    specs = _specs(int_tensor=types_pb2.DT_INT32, str_tensor=types_pb2.DT_STRING)
    err = _error(_predict, '{"instances": ' + instances + "}", specs)
    assert message in err.message


def test_object_after_list_instances():
    err = _error(
        _predict,
        '{"instances": [["baz", "bar"], {"str_tensor": ["baz", "bat"]}]}',
        _specs(str_tensor=types_pb2.DT_STRING),
    )
    assert err.message == "Expecting value/list but got object at item 1 of input list"


def test_columnar_errors():
    specs = _specs(a=types_pb2.DT_INT32, b=types_pb2.DT_INT32)
    assert _error(_predict, '{"inputs": {"a": [1]}}', specs).message == (
        "Missing named input: b in 'inputs' object."
    )
    assert _error(_predict, '{"inputs": [1]}', specs).message == (
        "inputs is a plain value/list, but expecting an object as multiple input tensors "
        "required as per tensorinfo_map"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"a": NaN, "b": Infinity, "c": -Infinity}', {"a": "nan", "b": "inf", "c": "-inf"}),
        (b'{"a": Inf, "b": -Inf}', {"a": "inf", "b": "-inf"}),
        (b'{"a": 1} trailing bytes', {"a": 1}),  # kParseStopWhenDoneFlag
        (b'\xef\xbb\xbf{"a": 1}', {"a": 1}),  # a UTF-8 byte order mark is skipped
        (b'{"a": 18446744073709551615}', {"a": 18446744073709551615}),
        (b'{"a": 18446744073709551616}', {"a": 1.8446744073709552e19}),
        (b'{"a": "\xff\xfe"}', {"a": b"\xff\xfe".decode("utf-8", "surrogateescape")}),
    ],
)
def test_loads_accepts_what_rapidjson_accepts(body, expected):
    doc = json_codec.loads(body)
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


# ----------------------------------------------------------- classify / regress request


def _examples(serialized: list[bytes]) -> list[example_pb2.Example]:
    return [example_pb2.Example.FromString(data) for data in serialized]


@pytest.mark.parametrize("verb", ["classify", "regress"])
def test_classify_regress_request_no_context(verb):
    doc = json_codec.loads(
        '{"examples": [{"names": ["foo", "bar"], "ratings": [8.0, 9.0], "age": 20},'
        ' {"names": ["baz"], "ratings": 6.0}]}'
    )
    signature, examples, context = json_codec.classify_regress_request(doc, verb)
    assert signature == "serving_default"
    assert context is None
    expected = [
        'features { feature { key: "names" value { bytes_list { value: ["foo", "bar"] } } }'
        ' feature { key: "ratings" value { float_list { value: [8.0, 9.0] } } }'
        ' feature { key: "age" value { int64_list { value: 20 } } } }',
        'features { feature { key: "names" value { bytes_list { value: "baz" } } }'
        ' feature { key: "ratings" value { float_list { value: 6.0 } } } }',
    ]
    assert _examples(examples) == [text_format.Parse(t, example_pb2.Example()) for t in expected]


@pytest.mark.parametrize("verb", ["classify", "regress"])
def test_classify_regress_request_with_context_and_signature(verb):
    doc = json_codec.loads(
        """{"signature_name": "custom_signture",
            "context": {"query": "pizza", "location": ["sfo"]},
            "examples": [
              {"names": ["foo", "bar"], "ratings": [8.0, 9.0, NaN, Infinity], "age": 20},
              {"names": ["baz", {"b64": "aGVsbG8="}], "ratings": 6.0,
               "intboolmix": [1, true, false]},
              {"names": "bar", "ratings": -Infinity}]}"""
    )
    signature, examples, context = json_codec.classify_regress_request(doc, verb)
    assert signature == "custom_signture"
    assert example_pb2.Example.FromString(context) == text_format.Parse(
        'features { feature { key: "query" value { bytes_list { value: "pizza" } } }'
        ' feature { key: "location" value { bytes_list { value: "sfo" } } } }',
        example_pb2.Example(),
    )
    first, second, third = _examples(examples)
    ratings = first.features.feature["ratings"].float_list.value
    assert ratings[:2] == [8.0, 9.0] and math.isnan(ratings[2]) and ratings[3] == math.inf
    assert second.features.feature["names"].bytes_list.value == [b"baz", b"hello"]
    assert second.features.feature["intboolmix"].int64_list.value == [1, 1, 0]
    assert third.features.feature["names"].bytes_list.value == [b"bar"]
    assert third.features.feature["ratings"].float_list.value == [-math.inf]


@pytest.mark.parametrize("verb", ["classify", "regress"])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '{"signature_name": ["hello"], "examples": [{"names": ["foo"]}]}',
            "'signature_name' key must be a string",
        ),
        (
            '{"context": [{"names": ["foo", "bar"]}]}',
            "Example must be JSON object but got JSON Array",
        ),
        (
            '{"examples": {"names": ["foo", "bar"]}}',
            "Expecting 'examples' value to be an list/array",
        ),
        ('{"examples": []}', "'examples' value is an empty array"),
        (
            '{"examples": [[{"names": ["foo", "bar"]}]]}',
            "Example must be JSON object but got JSON Array",
        ),
        (
            '{"examples": [{"names": [10, null]}]}',
            "Feature: names has element with unexpected JSON type: Null",
        ),
        (
            '{"examples": [{"names": [10, 10.0]}]}',
            "Unexpected element type in feature: names expecting type: int64",
        ),
        (
            '{"examples": [{"names": [10, {"test": 10}]}]}',
            "names has element with unexpected JSON type: Object",
        ),
        (
            '{"examples": [{"names": [[10], 20]}]}',
            "names has element with unexpected JSON type: Array",
        ),
        (
            '{"examples": [{"names": [20, 18446744073709551603]}]}',
            "Feature: names has uint64 element. Only int64 is supported.",
        ),
        (
            '{"examples": [{"names": 1.7976931348623157e308}]}',
            "to float without loss of precision.",
        ),
        ('{"examples": [{"names": {"b64": "%%%"}}]}', "Unable to base64 decode"),
        (
            "{}",
            "JSON Value: {} When method is classify, key 'examples' is expected and was not found",
        ),
    ],
)
def test_classify_regress_request_errors(verb, body, message):
    err = _error(json_codec.classify_regress_request, json_codec.loads(body), verb)
    assert err.code == Code.INVALID_ARGUMENT
    assert message in err.message


# ---------------------------------------------------------------- float formatting


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
    expected = json_codec.predict_response({"y": array}, row)
    monkeypatch.setattr(tfs_rest_json, "_CHUNK", chunk)
    assert json_codec.predict_response({"y": array}, row) == expected


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
    text = json_codec.predict_response({"y": array}, row)
    parsed = json.loads(text)["predictions" if row else "outputs"]
    np.testing.assert_array_equal(np.array(parsed, dtype=F32), array)


# ------------------------------------------------------------ predict response layout


def test_single_float_output_row_format():
    text = json_codec.predict_response({"y": F32([2.5, 3.0, 4.5])}, True)
    assert text == b'{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'


def test_from_json_single_tensor():
    tensor = np.array([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]], dtype=np.int32)
    assert json_codec.predict_response({"int_tensor": tensor}, True) == (
        b'{\n    "predictions": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]\n    ]\n}'
    )
    columnar = json_codec.predict_response({"int_tensor": tensor}, False).decode()
    assert json.loads(columnar) == {"outputs": tensor.tolist()}
    assert columnar.startswith(
        '{\n    "outputs": [\n        [\n            [\n                1,\n'
    )
    assert columnar.endswith("\n                2\n            ]\n        ]\n    ]\n}")


def test_from_json_single_scalar_tensor():
    tensor = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    assert json_codec.predict_response({"t": tensor}, True) == (
        b'{\n    "predictions": [1, 2, 3, 4, 5\n    ]\n}'
    )
    assert json_codec.predict_response({"t": tensor}, False) == (
        b'{\n    "outputs": [\n        1,\n        2,\n        3,\n        4,\n        5\n    ]\n}'
    )


def test_from_json_single_bytes_tensor():
    tensor = np.array([[b"hello", b"world"], [b"tf", b"serving"]], dtype=object)
    text = json_codec.predict_response({"str_tensor_bytes": tensor}, True).decode()
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
    assert json_codec.predict_response({"float_tensor": tensor}, True) == (
        b'{\n    "predictions": [[9e+06, 999999.0, 0.5], [0.0003, 3e-05, 555557.5]\n    ]\n}'
    )


def test_from_json_single_float_tensor_non_finite():
    tensor = F32([[np.nan, np.inf], [3, -np.inf]])
    assert json_codec.predict_response({"float_tensor": tensor}, True) == (
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
    text = json_codec.predict_response(_multiple_named_tensors(), True).decode()
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
    text = json_codec.predict_response(_multiple_named_tensors(), False).decode()
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
    assert json_codec.predict_response(outputs, row) == expected
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
    err = _error(json_codec.predict_response, outputs, True)
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message == message


def test_unsupported_dtype_without_values_is_written():
    outputs = {"tensor": np.zeros((0,), dtype=np.float16)}
    assert json_codec.predict_response(outputs, False) == b'{\n    "outputs": []\n}'


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
        assert json_codec.predict_response(outputs, row) == _reference_predict(outputs, row)


# ----------------------------------------------------------- classify / regress results


def test_json_from_classification_result():
    results = [
        [(b"car", 0.2), (b"bike", 0.7), (b"bus", 0.1)],
        [(b"car", 0.7), (b"bike", 0.1), (b"bus", 0.2)],
    ]
    assert json_codec.classify_response(results) == (
        b'{\n    "results": [[["car", 0.2], ["bike", 0.7], ["bus", 0.1]], '
        b'[["car", 0.7], ["bike", 0.1], ["bus", 0.2]]\n    ]\n}'
    )


def test_classification_result_with_empty_label_and_no_classes():
    assert json_codec.classify_response([[(b"", 1.0)], []]) == (
        b'{\n    "results": [[["", 1.0]], []\n    ]\n}'
    )


def test_json_from_regression_result():
    assert json_codec.regress_response([0.2, 0.9, 1.0]) == (b'{\n    "results": [0.2, 0.9, 1.0]\n}')
    assert json_codec.regress_response([0.2, math.inf, 1.0, -math.inf, math.nan]) == (
        b'{\n    "results": [0.2, Infinity, 1.0, -Infinity, NaN]\n}'
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (json_codec.classify_response, "Cannot convert empty ClassificationResults to JSON"),
        (json_codec.regress_response, "Cannot convert empty RegressionResults to JSON"),
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
    assert json_codec.error_body(message) == body


# -------------------------------------------------------------- status and metadata


def test_status_json():
    response = get_model_status_pb2.GetModelStatusResponse()
    response.model_version_status.add(version=123, state=30)
    failed = response.model_version_status.add(version=124, state=40)
    failed.status.error_code = 5
    failed.status.error_message = 'Not <found> "x"\u2028'
    assert json_codec.status_json(response).decode() == (
        "{\n"
        ' "model_version_status": [\n'
        "  {\n"
        '   "version": "123",\n'
        '   "state": "AVAILABLE",\n'
        '   "status": {\n'
        '    "error_code": "OK",\n'
        '    "error_message": ""\n'
        "   }\n"
        "  },\n"
        "  {\n"
        '   "version": "124",\n'
        '   "state": "UNLOADING",\n'
        '   "status": {\n'
        '    "error_code": "NOT_FOUND",\n'
        '    "error_message": "Not \\u003cfound\\u003e \\"x\\"\\u2028"\n'
        "   }\n"
        "  }\n"
        " ]\n"
        "}\n"
    )
    assert not response.model_version_status[0].HasField("status")  # not modified


def test_status_json_without_versions():
    response = get_model_status_pb2.GetModelStatusResponse()
    assert json_codec.status_json(response) == b'{\n "model_version_status": []\n}\n'


def _metadata_response(
    signatures: dict[str, str],
) -> get_model_metadata_pb2.GetModelMetadataResponse:
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = "half_plus_two"
    response.model_spec.version.value = 123
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for key, text in signatures.items():
        text_format.Parse(text, signature_map.signature_def[key])
    response.metadata["signature_def"].Pack(signature_map)
    return response


def test_metadata_json():
    response = _metadata_response(
        {
            "serving_default": 'inputs { key: "x" value { name: "x:0" dtype: DT_FLOAT '
            "tensor_shape { dim { size: -1 } dim { size: 1 } } } } "
            'method_name: "tensorflow/serving/predict"',
            "classify": 'inputs { key: "inputs" value { name: "tf_example:0" dtype: DT_STRING '
            'tensor_shape { unknown_rank: true } } } method_name: "tensorflow/serving/classify"',
        }
    )
    assert json_codec.metadata_json(response).decode() == (
        '{\n"model_spec":{\n "name": "half_plus_two",\n "signature_name": "",\n'
        ' "version": "123"\n}\n,\n"metadata": {"signature_def": {\n "signature_def": {\n'
        '  "classify": {\n   "inputs": {\n    "inputs": {\n     "dtype": "DT_STRING",\n'
        '     "tensor_shape": {\n      "dim": [],\n      "unknown_rank": true\n     },\n'
        '     "name": "tf_example:0"\n    }\n   },\n   "outputs": {},\n'
        '   "method_name": "tensorflow/serving/classify",\n   "defaults": {}\n  },\n'
        '  "serving_default": {\n   "inputs": {\n    "x": {\n     "dtype": "DT_FLOAT",\n'
        '     "tensor_shape": {\n      "dim": [\n       {\n        "size": "-1",\n'
        '        "name": ""\n       },\n       {\n        "size": "1",\n        "name": ""\n'
        '       }\n      ],\n      "unknown_rank": false\n     },\n'
        '     "name": "x:0"\n    }\n   },\n   "outputs": {},\n'
        '   "method_name": "tensorflow/serving/predict",\n   "defaults": {}\n  }\n }\n}\n}\n}\n'
    )


def test_metadata_json_field_order_follows_tf_serving():
    """Key order of TF Serving's metadata testdata (servables/tensorflow/testdata/
    saved_model_half_plus_two_2_versions_metadata.json)."""
    response = _metadata_response(
        {
            "serving_default": 'inputs { key: "x" value { name: "x:0" dtype: DT_FLOAT '
            'tensor_shape { dim { size: -1 } } } } outputs { key: "y" value { name: "y:0" '
            "dtype: DT_FLOAT tensor_shape { dim { size: -1 } } } } "
            'method_name: "tensorflow/serving/predict"'
        }
    )
    doc = json.loads(json_codec.metadata_json(response))
    assert list(doc) == ["model_spec", "metadata"]
    assert list(doc["model_spec"]) == ["name", "signature_name", "version"]
    signature = doc["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert list(signature) == ["inputs", "outputs", "method_name", "defaults"]
    assert list(signature["inputs"]["x"]) == ["dtype", "tensor_shape", "name"]
    assert signature["inputs"]["x"]["tensor_shape"] == {
        "dim": [{"size": "-1", "name": ""}],
        "unknown_rank": False,
    }


def test_metadata_json_oneof_message_and_defaults():
    """A set oneof message keeps its declaration slot; float/bytes/int64 fields print as
    protobuf's C++ printer does (SimpleFtoa, base64, quoted int64)."""
    response = _metadata_response(
        {
            "s": 'inputs { key: "sp" value { coo_sparse { values_tensor_name: "v" } '
            "dtype: DT_INT64 } }"
            ' defaults { key: "d" value { dtype: DT_FLOAT float_val: [0.1, 1e+20, nan] '
            'tensor_content: "\\001\\002" int64_val: 7 } }'
        }
    )
    doc = json.loads(json_codec.metadata_json(response))
    signature = doc["metadata"]["signature_def"]["signature_def"]["s"]
    assert list(signature["inputs"]["sp"]) == ["coo_sparse", "dtype"]
    default = signature["defaults"]["d"]
    assert default["float_val"] == [0.1, 1e20, "NaN"]
    assert default["tensor_content"] == "AQI="
    assert default["int64_val"] == ["7"]
    assert default["version_number"] == 0
    text = json_codec.metadata_json(response).decode()
    assert '"float_val": [\n      0.1,\n      1e+20,\n      "NaN"\n     ],' in text


def test_metadata_json_requires_signature_def():
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    err = _error(json_codec.metadata_json, response)
    assert err.code == Code.INTERNAL
    response.metadata["signature_def"].Pack(model_pb2.ModelSpec())
    assert _error(json_codec.metadata_json, response).message == (
        "Failed to unpack 'Any' object to 'SignatureDefMap'."
    )


def test_metadata_json_escapes_like_protobuf():
    response = _metadata_response({"s": 'method_name: "<a>\\x7f\\u00ad\\u00e9\\U0001d173"'})
    text = json_codec.metadata_json(response).decode()
    assert '"method_name": "\\u003ca\\u003e\\u007f\\u00ad\u00e9\\ud834\\udd73"' in text


def test_signature_def_has_expected_fields():
    """The printer lays out SignatureDef's fields from its descriptor (TF 2.x has defaults)."""
    names = [field.name for field in meta_graph_pb2.SignatureDef.DESCRIPTOR.fields]
    assert names[:3] == ["inputs", "outputs", "method_name"]
