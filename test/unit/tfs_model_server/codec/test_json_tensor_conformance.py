"""TF Serving's own JSON codec tests, the sub-cases not ported elsewhere.

Ports tensorflow_serving/util/json_tensor_test.cc (TF Serving 2.20, unchanged since Aug 2024)
to our codec; test names and ids keep its TEST names. Sub-cases already ported live in
test_predict_request.py (request parsing, same TEST names), test_responses.py
(MakeJsonFromTensors, MakeJsonFromClassificationResult/RegressionResult, MakeJsonFromStatus)
and test_example_request.py (ClassifyRegressRequestTest.*); they are not repeated here.

Not ported: MakeJsonFromTensors.StatusOK (MakeJsonFromStatus of an OK status writes "").
Our error_body() takes an error message, not a status; an OK answer has no error body, so
the case has no REST counterpart.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from tfs_model_server.codec.json_reader import loads
from tfs_model_server.codec.predict_request import predict_inputs
from tfs_model_server.codec.value_text import value_to_string
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.tensor_spec import TensorSpec

_DEEP = 500000


def _specs(**dtypes: int) -> dict[str, TensorSpec]:
    return {name: TensorSpec(name, f"{name}:0", dtype, None) for name, dtype in dtypes.items()}


def _predict(body: str | bytes, **dtypes: int) -> tuple[dict[str, np.ndarray], bool]:
    return predict_inputs(loads(body), _specs(**dtypes))


def _error(body: str | bytes, **dtypes: int) -> ServingError:
    with pytest.raises(ServingError) as info:
        _predict(body, **dtypes)
    return info.value


def test_deeply_nested_well_formed():
    """JsontensorTest.DeeplyNestedWellFormed: 500000 levels in an ignored key parse."""
    body = '{"instances":[1], "nested":' + "[" * _DEEP + "]" * _DEEP + "}"
    inputs, row = _predict(body, default=types_pb2.DT_INT32)
    assert row is True
    assert list(inputs) == ["default"]
    assert inputs["default"].tolist() == [1]


def test_deeply_nested_malformed():
    """JsontensorTest.DeeplyNestedMalformed: the error quotes the document, truncated."""
    body = '{"signature_name":' + "[" * _DEEP + "]" * _DEEP + "}"
    err = _error(body, default=types_pb2.DT_INT32)
    assert err.code == Code.INVALID_ARGUMENT
    assert "key must be a string value" in err.message


# JsontensorTest.FloatTensorWithPrecisionLoss, FloatTensorThatExceedsMaxReturnsInf,
# FloatTensorThatExceedsMinReturnsZero: a JSON number becomes a float as
# static_cast<float>(double) does, whatever precision or range it loses. The .cc test writes
# +-DBL_MAX and +-DBL_MIN with absl::Substitute, i.e. six significant digits.
@pytest.mark.parametrize(
    ("number", "expected"),
    [
        pytest.param("1435774380", 1435774336.0, id="FloatTensorWithPrecisionLoss-int"),
        pytest.param("1435774380.0", 1435774336.0, id="FloatTensorWithPrecisionLoss-decimal"),
        pytest.param("1.79769e+308", math.inf, id="FloatTensorThatExceedsMaxReturnsInf-max"),
        pytest.param("-1.79769e+308", -math.inf, id="FloatTensorThatExceedsMaxReturnsInf-min"),
        pytest.param("2.22507e-308", 0.0, id="FloatTensorThatExceedsMinReturnsZero-min"),
        pytest.param("-2.22507e-308", -0.0, id="FloatTensorThatExceedsMinReturnsZero-neg"),
    ],
)
def test_float_tensor_conversion(number, expected):
    inputs, row = _predict('{ "instances": [' + number + "] }", default=types_pb2.DT_FLOAT)
    assert row is True
    tensor = inputs["default"]
    assert tensor.dtype == np.float32
    assert tensor.shape == (1,)
    assert tensor[0] == np.float32(expected)
    assert math.copysign(1.0, tensor[0]) == math.copysign(1.0, expected)


def test_tensor_from_non_null_terminated_buffer():
    """JsontensorTest.TensorFromNonNullTerminatedBuffer: only the given bytes are read."""
    jsonstr = b'{"instances": [[1,2],[3,4],[5,6]]}X'
    inputs, row = _predict(memoryview(jsonstr)[:-1].tobytes(), default=types_pb2.DT_INT32)
    assert row is True
    assert inputs["default"].dtype == np.int32
    assert inputs["default"].tolist() == [[1, 2], [3, 4], [5, 6]]


# JsontensorTest.SingleUnnamedTensorErrors, the sub-cases test_predict_request.py does not
# have with these bodies (the .cc test checks the code and a substring only).
@pytest.mark.parametrize(
    ("body", "substring"),
    [
        pytest.param("", "document is empty", id="empty"),
        pytest.param(
            '{"signature_name": 5, "instances": [[1,2],[3,4],[5,6,7]]}',
            "must be a string value",
            id="signature_name-not-string",
        ),
        pytest.param(
            '{"instances": [[1,2],[3,4],[5,6,7]], "inputs": [[1,2],[3,4],[5,6,7]]}',
            "Not formatted correctly",
            id="instances-and-inputs",
        ),
    ],
)
def test_single_unnamed_tensor_errors(body, substring):
    err = _error(body, default=types_pb2.DT_INT32)
    assert err.code == Code.INVALID_ARGUMENT
    assert substring in err.message


# JsonValueToDebugString() quotes request values in error texts: PrettyWriter with
# kFormatSingleLineArray, cut off at the first event once 256 bytes are written
# (kMaxJsonDebugStringBytes; json_tensor.cc JsonValueToDebugString). The .cc tests only
# match substrings; these pin the whole texts of two of their sub-cases and of the
# missing-key error (json_tensor.cc FillTensorMapFromInstancesList).
@pytest.mark.parametrize(
    ("body", "dtypes", "message"),
    [
        pytest.param(
            '{"signature_name": 5, "instances": [[1,2],[3,4],[5,6,7]]}',
            {"default": types_pb2.DT_INT32},
            'JSON Value: {\n    "signature_name": 5,\n    "instances": [[1, 2], [3, 4], '
            "[5, 6, 7]]\n} not formatted correctly. 'signature_name' key must be a string "
            "value.",
            id="SingleUnnamedTensorErrors-signature_name",
        ),
        pytest.param(
            '{"instances": [[1,2],[3,4],[5,6,7]], "inputs": [[1,2],[3,4],[5,6,7]]}',
            {"default": types_pb2.DT_INT32},
            'JSON Value: {\n    "instances": [[1, 2], [3, 4], [5, 6, 7]],\n    "inputs": '
            "[[1, 2], [3, 4], [5, 6, 7]]\n} Not formatted correctly expecting only one of "
            "'inputs' or 'instances' keys to exist ",
            id="SingleUnnamedTensorErrors-both-keys",
        ),
        pytest.param(
            '{"instances": [{"int_tensor": [[1,2]]}]}',
            {"int_tensor": types_pb2.DT_INT32, "str_tensor": types_pb2.DT_STRING},
            "Failed to process element: 0 of 'instances' list. JSON object: {\n    "
            '"int_tensor": [[1, 2]]\n} keys must be equal to: int_tensor,str_tensor',
            id="instances-object-missing-key",
        ),
    ],
)
def test_error_texts_quote_values_as_tf_serving(body, dtypes, message):
    err = _error(body, **dtypes)
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message == message


def test_error_text_quotes_at_most_256_bytes():
    """kMaxJsonDebugStringBytes: no writer event starts once 256 bytes are written."""
    expected = '{\n    "instances": ['
    for number in range(200):
        if len(expected) >= 256:
            break
        expected += (", " if number else "") + str(number)
    assert value_to_string({"instances": list(range(200))}) == expected
    assert value_to_string([math.nan]) == "["  # the writer refuses NaN and stops
