"""proto_json: status and metadata as TF Serving's REST API prints them."""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

from tfs_model_server.codec.proto_json import metadata_json, status_json
from tfs_model_server.errors import Code, ServingError


def _error(call, *args) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value


def test_status_json():
    response = get_model_status_pb2.GetModelStatusResponse()
    response.model_version_status.add(version=123, state=30)
    failed = response.model_version_status.add(version=124, state=40)
    failed.status.error_code = 5
    failed.status.error_message = 'Not <found> "x"\u2028'
    assert status_json(response).decode() == (
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
    assert status_json(response) == b'{\n "model_version_status": []\n}\n'


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
    assert metadata_json(response).decode() == (
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
    doc = json.loads(metadata_json(response))
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
    doc = json.loads(metadata_json(response))
    signature = doc["metadata"]["signature_def"]["signature_def"]["s"]
    assert list(signature["inputs"]["sp"]) == ["coo_sparse", "dtype"]
    default = signature["defaults"]["d"]
    assert default["float_val"] == [0.1, 1e20, "NaN"]
    assert default["tensor_content"] == "AQI="
    assert default["int64_val"] == ["7"]
    assert default["version_number"] == 0
    text = metadata_json(response).decode()
    assert '"float_val": [\n      0.1,\n      1e+20,\n      "NaN"\n     ],' in text


def test_metadata_json_requires_signature_def():
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    err = _error(metadata_json, response)
    assert err.code == Code.INTERNAL
    response.metadata["signature_def"].Pack(model_pb2.ModelSpec())
    assert _error(metadata_json, response).message == (
        "Failed to unpack 'Any' object to 'SignatureDefMap'."
    )


def test_metadata_json_escapes_like_protobuf():
    response = _metadata_response({"s": 'method_name: "<a>\\x7f\\u00ad\\u00e9\\U0001d173"'})
    text = metadata_json(response).decode()
    assert '"method_name": "\\u003ca\\u003e\\u007f\\u00ad\u00e9\\ud834\\udd73"' in text


def test_signature_def_has_expected_fields():
    """The printer lays out SignatureDef's fields from its descriptor (TF 2.x has defaults)."""
    names = [field.name for field in meta_graph_pb2.SignatureDef.DESCRIPTOR.fields]
    assert names[:3] == ["inputs", "outputs", "method_name"]
