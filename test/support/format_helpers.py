"""Helpers of the built-in formats' unit tests: signature inputs, payloads (.npy, tf.Examples)
and the request bodies and errors the decoders give."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.request import ModelRequest, decode_request
from sagemaker_serving.formats.signature import InputSpec
from sagemaker_serving.tfs_client.wire import Example


def doc(request: ModelRequest) -> Any:
    """The request body parsed, NaN/Infinity allowed."""
    return json.loads(request.body)


def spec(name: str, dtype: str = "DT_FLOAT", shape: tuple[int, ...] | None = (-1,)) -> InputSpec:
    return InputSpec(name, dtype, shape)


def specs(*items: InputSpec) -> dict[str, InputSpec]:
    return {item.name: item for item in items}


def tf_serving_inputs(request: ModelRequest, inputs: dict[str, InputSpec]) -> tuple[dict, bool]:
    """What the model server's TF Serving JSON parser makes of a predict request body for
    these inputs: (arrays by name, whether the body is in row format)."""
    from tensorflow.core.framework import types_pb2

    from tfs_model_server.codec.json_reader import loads
    from tfs_model_server.codec.predict_request import predict_inputs
    from tfs_model_server.tensor_spec import TensorSpec

    tensor_specs = {
        name: TensorSpec(name, f"{name}:0", types_pb2.DataType.Value(s.dtype), None)
        for name, s in inputs.items()
    }
    return predict_inputs(loads(request.body), tensor_specs)


def tf_serving_examples(request: ModelRequest) -> list[bytes]:
    """The serialized tf.train.Examples the model server's TF Serving JSON parser makes of a
    classify/regress request body."""
    from tfs_model_server.codec.example_request import classify_regress_request
    from tfs_model_server.codec.json_reader import loads

    _, serialized, _ = classify_regress_request(loads(request.body))
    return list(serialized)


def decode_error(*args: Any, **kwargs: Any) -> PayloadError:
    """The PayloadError decode_request raises for these arguments."""
    with pytest.raises(PayloadError) as info:
        decode_request(*args, **kwargs)
    return info.value


def assert_400_naming(body: bytes, content_type: str, part: str) -> None:
    """decode_request refuses the body with a 400 whose message holds `part`."""
    err = decode_error(body, content_type, None)
    assert err.status == 400 and part in err.message, err.message


def make_example(**features: Any) -> Example:
    """Example from keyword features: bytes -> bytes_list, float -> float_list, int -> int64."""
    example = Example()
    for name, values in features.items():
        values = values if isinstance(values, list) else [values]
        feature = example.features.feature[name]
        if values and isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif values and isinstance(values[0], float):
            feature.float_list.value.extend(values)
        else:
            feature.int64_list.value.extend(values)
    return example


def npy(array: np.ndarray) -> bytes:
    """The array as a .npy file's bytes."""
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()
