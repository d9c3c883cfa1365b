"""The signatures a TFLite model is served with, found as TF Serving's TfLiteSession finds them
(tflite_session.cc, TfLiteSession::Create), with one addition:

1. the SignatureDefs stored in the model's `signature_defs_metadata` entry (what TF Serving
   reads: tflite::GetSignatureDefMap); each TensorInfo names an input or output tensor of the
   model's primary subgraph, `:0` dropped when only the legacy name exists;
2. ours: the model's own signatures (those of `tf.lite.Interpreter.get_signature_runner`, which
   TFLiteConverter writes for each SavedModel signature it converts), keyed and aliased as in
   the SavedModel. TF Serving ignores them and goes on to 3., which names a TF2 conversion's
   input `serving_default_x` instead of the SavedModel's `x`;
3. else, as TF Serving, one generated `serving_default` predict signature over the primary
   subgraph's inputs and outputs, each aliased by its tensor name without `:0`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from tfs_model_server import tf_runtime
from tfs_model_server.errors import internal, invalid_argument

SIGNATURE_METADATA = "signature_defs_metadata"
DEFAULT_SIGNATURE = "serving_default"
PREDICT_METHOD = "tensorflow/serving/predict"


@dataclass(frozen=True)
class Binding:
    """How a signature runs on an interpreter: through the signature runner named `runner`
    (aliases are its input and output names), or, when `runner` is None, on the primary
    subgraph's tensors (`inputs` and `outputs` map each alias to a tensor index)."""

    runner: str | None
    inputs: Mapping[str, int]
    outputs: Mapping[str, int]


Found = dict[str, tuple[meta_graph_pb2.SignatureDef, Binding]]


def datatype(dtype: Any) -> int:
    """The tensorflow.DataType of a TFLite tensor's numpy type (strings: DT_STRING)."""
    if np.dtype(dtype).kind in "OSU":
        return types_pb2.DT_STRING
    return int(tf_runtime.as_dtype(np.dtype(dtype)).as_datatype_enum)


def _tensor_info(name: str, dtype: Any, dims: Sequence[int]) -> meta_graph_pb2.TensorInfo:
    info = meta_graph_pb2.TensorInfo(name=name, dtype=datatype(dtype))  # type: ignore[arg-type]
    for size in dims:
        info.tensor_shape.dim.add(size=int(size))
    return info


def metadata_signatures(model: bytes) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The SignatureDefs in the model's `signature_defs_metadata` (a flexbuffer map of key to
    serialized SignatureDef), {} without that entry."""
    from flatbuffers import flexbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    try:
        root = schema.Model.GetRootAsModel(model, 0)
        for i in range(root.MetadataLength()):
            entry = root.Metadata(i)
            if entry.Name() != SIGNATURE_METADATA.encode():
                continue
            data = root.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
            table = flexbuffers.GetRoot(data).AsMap
            keys, values = table.Keys, table.Values
            return {
                keys[j].AsKey: meta_graph_pb2.SignatureDef.FromString(values[j].AsStringBytes)
                for j in range(len(table))
            }
    except Exception as exc:  # a corrupt flatbuffer or proto, whatever the parser raises
        raise invalid_argument(f"Invalid SignatureDefs found in TfLite model: {exc}") from exc
    return {}


def _legacy(name: str) -> str:
    """TfToTfLiteLegacyTensorName: early converters dropped TF's `:0` suffix."""
    return name.split(":", 1)[0]


def _index(tensors: Mapping[str, int], name: str, what: str) -> tuple[str, int]:
    """FixTfLiteTensorName: the tensor's name (the legacy one when only that exists) and index."""
    for candidate in (name, _legacy(name)):
        if candidate in tensors:
            return candidate, tensors[candidate]
    raise internal(f"Unknown tensor '{name}'. {what} references an unknown tensor")


def _from_metadata(defs: Mapping[str, meta_graph_pb2.SignatureDef], interpreter: Any) -> Found:
    inputs = {d["name"]: d["index"] for d in interpreter.get_input_details()}
    outputs = {d["name"]: d["index"] for d in interpreter.get_output_details()}
    found: Found = {}
    for key, given in defs.items():
        proto = meta_graph_pb2.SignatureDef()
        proto.CopyFrom(given)
        feeds, fetches = {}, {}
        for alias, info in proto.inputs.items():
            info.name, feeds[alias] = _index(inputs, info.name, f"Signature input {alias}")
        for alias, info in proto.outputs.items():
            info.name, fetches[alias] = _index(outputs, info.name, f"Signature output {alias}")
        found[key] = (proto, Binding(None, feeds, fetches))
    return found


def _from_runners(interpreter: Any) -> Found:
    found: Found = {}
    for key in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(key)
        proto = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
        for alias, d in runner.get_input_details().items():
            proto.inputs[alias].CopyFrom(_tensor_info(d["name"], d["dtype"], d["shape_signature"]))
        for alias, d in runner.get_output_details().items():
            proto.outputs[alias].CopyFrom(_tensor_info(d["name"], d["dtype"], d["shape_signature"]))
        found[key] = (proto, Binding(key, {}, {}))
    return found


def _generated(interpreter: Any) -> Found:
    proto = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    feeds, fetches = {}, {}
    for d in interpreter.get_input_details():
        alias = _legacy(d["name"])
        proto.inputs[alias].CopyFrom(_tensor_info(d["name"], d["dtype"], d["shape"]))
        feeds[alias] = d["index"]
    for d in interpreter.get_output_details():
        alias = _legacy(d["name"])
        proto.outputs[alias].CopyFrom(_tensor_info(d["name"], d["dtype"], d["shape"]))
        fetches[alias] = d["index"]
    return {DEFAULT_SIGNATURE: (proto, Binding(None, feeds, fetches))}


def model_signatures(model: bytes, interpreter: Any) -> Found:
    """Each signature's SignatureDef (what metadata reports) and how it runs, by key."""
    defs = metadata_signatures(model)
    if defs:
        return _from_metadata(defs, interpreter)
    return _from_runners(interpreter) or _generated(interpreter)


__all__ = ["Binding", "datatype", "metadata_signatures", "model_signatures"]
