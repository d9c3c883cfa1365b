"""predict_request: the 'instances' and 'inputs' layouts as tensors, with TF Serving's errors.

Cases ported from tensorflow_serving/util/json_tensor_test.cc keep the test names there.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from tfs_model_server.codec.json_reader import loads
from tfs_model_server.codec.predict_request import predict_inputs
from tfs_model_server.codec.request_object import predict_signature_name
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.tensor_spec import TensorSpec

F32 = np.float32


def _specs(**dtypes: int) -> dict[str, TensorSpec]:
    return {name: TensorSpec(name, f"{name}:0", dtype, None) for name, dtype in dtypes.items()}


def _error(call, *args) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value


def _predict(body: str | bytes, specs: dict[str, TensorSpec]):
    return predict_inputs(loads(body), specs)


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
    doc = loads('{"signature_name": "predict_images", "instances": [[1,2]]}')
    assert predict_signature_name(doc) == "predict_images"
    inputs, _ = predict_inputs(doc, _specs(default=types_pb2.DT_INT32))
    np.testing.assert_array_equal(inputs["default"], [[1, 2]])


@pytest.mark.parametrize("doc", [{}, {"signature_name": ""}, {"instances": [1]}])
def test_default_signature_name(doc):
    assert predict_signature_name(doc) == "serving_default"


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
    ("dtype", "body", "expected"),
    [
        (types_pb2.DT_FLOAT, "[16777217, 3.5e38, -1e39]", F32([16777216, np.inf, -np.inf])),
        (types_pb2.DT_DOUBLE, "[9007199254740993]", np.array([9007199254740992.0])),
    ],
)
def test_decimal_inputs_are_rounded_not_refused(dtype, body, expected):
    """GetFloat()/GetDouble(): any JSON number, rounded as a C cast rounds it."""
    inputs, _ = _predict('{"instances": ' + body + "}", _specs(default=dtype))
    assert inputs["default"].dtype == expected.dtype
    np.testing.assert_array_equal(inputs["default"], expected)


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


@pytest.mark.parametrize(
    ("body", "specs", "message"),
    [
        ("[1, 2]", None, "JSON Value: [1, 2] Is not object"),
        ('{"foo": 1}', "f", "Missing 'inputs' or 'instances' key"),
        (
            '{"instances": []}',
            "f",
            "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array",
        ),
        (
            '{"instances": 1}',
            "f",
            "JSON Value: {\n    \"instances\": 1\n} Expecting 'instances' to be an list/array",
        ),
        (
            '{"instances": [1], "inputs": [1]}',
            "f",
            'JSON Value: {\n    "instances": [1],\n    "inputs": [1]\n} Not formatted correctly '
            "expecting only one of 'inputs' or 'instances' keys to exist ",
        ),
        (
            '{"signature_name": 5, "instances": [1]}',
            "f",
            'JSON Value: {\n    "signature_name": 5,\n    "instances": [1]\n} not formatted '
            "correctly. 'signature_name' key must be a string value.",
        ),
        (
            '{"instances": ["a"]}',
            "f",
            _ELEMENT_ERROR.format(0)
            + 'JSON Value: "a" Type: String is not of expected type: float',
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
        err = _error(lambda: predict_inputs(loads(body), _specs()))
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
            '"int_tensor": [1]\n} keys must be equal to: int_tensor,str_tensor',
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


@pytest.mark.parametrize("depth", [63, 64, 65, 100, 1000, 4999])
@pytest.mark.parametrize(
    ("layout", "batch_levels"),
    [
        ('{"instances": %s}', 0),
        ('{"instances": [%s, [1.0]]}', None),  # not dense: the exact walk refuses it anyway
        ('{"inputs": %s}', 0),
        ('{"instances": [{"default": %s}]}', 1),
    ],
)
def test_nesting_beyond_64_levels_is_the_requests_fault(
    depth: int, layout: str, batch_levels: int | None
):
    """An ndarray has at most 64 dimensions: deeper JSON is a 400 (INVALID_ARGUMENT), not a
    failure of the server, on every layout."""
    nested = "[" * depth + "1.0" + "]" * depth
    body = layout.replace("%s", nested)
    specs = _specs(default=types_pb2.DT_FLOAT)
    if batch_levels is not None and depth + batch_levels <= 64:
        inputs, _ = _predict(body, specs)  # a dense tensor of 64 dimensions is still one
        assert inputs["default"].ndim == depth + batch_levels
        return
    err = _error(_predict, body, specs)
    assert err.code == Code.INVALID_ARGUMENT
    if batch_levels is not None:
        assert "Too many dimensions" in err.message, err.message
    assert len(err.message) < 600
