"""sagemaker_serving.formats.signature: a signature's inputs and outputs from TF Serving's
model metadata JSON."""

from __future__ import annotations

import pytest

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.signature import (
    InputSpec,
    signature,
    string_inputs,
)

METADATA = {
    "model_spec": {"name": "m", "version": "1"},
    "metadata": {
        "signature_def": {
            "signature_def": {
                "serving_default": {
                    "inputs": {
                        "image_bytes": {
                            "dtype": "DT_STRING",
                            "tensor_shape": {"dim": [{"size": "-1"}], "unknown_rank": False},
                            "name": "serving_default_image_bytes:0",
                        },
                        "scale": {
                            "dtype": "DT_FLOAT",
                            "tensor_shape": {"dim": [{"size": -1}, {"size": "3"}]},
                            "name": "scale:0",
                        },
                        "anything": {"dtype": "DT_INT64", "tensor_shape": {"unknown_rank": True}},
                        "scalar": {"dtype": "DT_INT32", "tensor_shape": {}},
                    },
                    "outputs": {"y": {"dtype": 1, "tensor_shape": {"dim": [{"size": "-1"}]}}},
                    "method_name": "tensorflow/serving/predict",
                },
                "regress_x": {"inputs": {}, "outputs": {}},
                "__saved_model_init_op": {"inputs": {}, "outputs": {}},
            }
        }
    },
}


def test_signature_inputs():
    inputs, _ = signature(METADATA)
    assert inputs == {
        "image_bytes": InputSpec("image_bytes", "DT_STRING", (-1,)),
        "scale": InputSpec("scale", "DT_FLOAT", (-1, 3)),
        "anything": InputSpec("anything", "DT_INT64", None),
        "scalar": InputSpec("scalar", "DT_INT32", ()),
    }
    assert signature(METADATA, "regress_x") == ({}, {})
    assert string_inputs(inputs) == ["image_bytes"]


def test_signature_outputs_name_a_numeric_dtype():
    assert signature(METADATA)[1] == {"y": InputSpec("y", "DT_FLOAT", (-1,))}


def test_signature_inputs_missing_signature_400():
    with pytest.raises(PayloadError) as info:
        signature(METADATA, "nope")
    assert info.value.status == 400
    assert '"nope"' in info.value.message
    assert "(available: regress_x, serving_default)" in info.value.message  # no init op


def test_signature_inputs_bad_metadata():
    with pytest.raises(ValueError):
        signature({"error": "x"})
