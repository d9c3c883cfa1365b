"""A classify or regress request's JSON as serialized tf.Examples
(FillClassifyRegressRequestFromJson, MakeExampleFromJsonObject), with TF Serving's error texts."""

from __future__ import annotations

from typing import Any

from tensorflow.core.example import example_pb2, feature_pb2

from tfs_model_server.codec.base64_objects import decode_b64_object, is_b64_object
from tfs_model_server.codec.request_object import format_error, predict_signature_name
from tfs_model_server.codec.tensors import INT64_MAX
from tfs_model_server.codec.value_text import json_type
from tfs_model_server.errors import invalid_argument
from tfs_rest_json import utf8 as _utf8


def _feature_value(value: Any, name: str) -> tuple[str, Any]:
    """AddValueToFeature() without the kind check: (kind, value)."""
    if (
        value is None
        or isinstance(value, list)
        or (isinstance(value, dict) and not is_b64_object(value))
    ):
        raise invalid_argument(
            f"Feature: {name} has element with unexpected JSON type: {json_type(value)}"
        )
    if isinstance(value, bool):
        return "int64", int(value)
    if isinstance(value, dict):
        return "bytes", value
    if isinstance(value, str):
        return "bytes", _utf8(value)
    if isinstance(value, float):
        return "float", value
    return "int64", value


def _checked_feature_value(kind: str, value: Any, name: str) -> Any:
    """A float feature value is kept as it is: float_list stores it as GetFloat() does."""
    if isinstance(value, dict):
        return decode_b64_object(value)
    if kind == "int64" and value > INT64_MAX:
        raise invalid_argument(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    return value


def _feature(content: Any, name: str) -> feature_pb2.Feature:
    feature = feature_pb2.Feature()
    kind, values = None, []
    for item in content if isinstance(content, list) else [content]:
        item_kind, value = _feature_value(item, name)
        if kind is not None and item_kind != kind:
            raise invalid_argument(
                f"Unexpected element type in feature: {name} expecting type: {kind}"
            )
        kind = item_kind
        values.append(_checked_feature_value(kind, value, name))
    if kind is not None:
        getattr(feature, f"{kind}_list").value.extend(values)
    return feature


def _example(value: Any) -> bytes:
    """MakeExampleFromJsonObject(), serialized."""
    if not isinstance(value, dict):
        raise invalid_argument(f"Example must be JSON object but got JSON {json_type(value)}")
    example = example_pb2.Example()
    features = example.features.feature
    for name, content in value.items():
        features[name].CopyFrom(_feature(content, name))
    return example.SerializeToString(deterministic=True)


def classify_regress_request(
    doc: Any, verb: str = "classify"
) -> tuple[str, list[bytes], bytes | None]:
    """FillClassifyRegressRequestFromJson(): (signature, serialized Examples, context).

    `verb` ('classify' or 'regress') changes nothing: TF Serving parses both requests with
    the same code, whose missing-'examples' message says "classify" for regress too.
    """
    del verb
    signature = predict_signature_name(doc)
    context = _example(doc["context"]) if "context" in doc else None
    if "examples" not in doc:
        raise format_error(
            doc, "When method is classify, key 'examples' is expected and was not found"
        )
    examples = doc["examples"]
    if not isinstance(examples, list):
        raise format_error(doc, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise format_error(doc, "'examples' value is an empty array")
    return signature, [_example(example) for example in examples], context
