"""TF Serving's REST conventions: the JSON text of tensors (its number text and its predict
response layout) and the HTTP status of each status code (status_codes.http_status).

A port of tensorflow_serving/util/json_tensor.cc's writer (rapidjson's PrettyWriter, WriteDecimal)
in pure numpy, shared by our model server (tfs_model_server.codec.responses) and the SageMaker
service's gRPC tensor path (sagemaker_serving.formats.tensors), so both write the same bytes
for the same tensors. No TensorFlow here.
"""

from tfs_rest_json.numbers import decimal, float32_joined, float32_text, float64_tokens
from tfs_rest_json.predict import predict_response
from tfs_rest_json.status_codes import http_status
from tfs_rest_json.strings import TensorJsonError, indent, json_string, utf8

__all__ = [
    "TensorJsonError",
    "decimal",
    "float32_joined",
    "float32_text",
    "float64_tokens",
    "http_status",
    "indent",
    "json_string",
    "predict_response",
    "utf8",
]
