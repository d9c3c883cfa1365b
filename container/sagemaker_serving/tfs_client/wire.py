"""PredictRequest/PredictResponse and tf.train.Example on the wire, without TensorFlow.

TF Serving's generated protobuf modules import the `tensorflow` package (seconds and hundreds
of MB per gunicorn worker). Protobuf's wire format carries field numbers, not package names,
so a message with the same field numbers and types is the same bytes. This module declares
that subset (PredictRequest, PredictResponse, ModelSpec, TensorProto, TensorShapeProto) in a
private descriptor pool (plus tf.train.Example, for the x-tfexample format), and converts
numpy arrays to and from TensorProto. A unit test
checks every field against TensorFlow's own descriptors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PREDICT_METHOD = "/tensorflow.serving.PredictionService/Predict"
RELOAD_CONFIG_METHOD = "/tensorflow.serving.ModelService/HandleReloadConfigRequest"

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PACKAGE = "sagemaker_serving.wire"

# TensorProto's repeated value fields: (field, number, type)
_TENSOR_VALUES = [
    ("float_val", 5, _F.TYPE_FLOAT), ("double_val", 6, _F.TYPE_DOUBLE),
    ("int_val", 7, _F.TYPE_INT32), ("string_val", 8, _F.TYPE_BYTES),
    ("scomplex_val", 9, _F.TYPE_FLOAT), ("int64_val", 10, _F.TYPE_INT64),
    ("bool_val", 11, _F.TYPE_BOOL), ("dcomplex_val", 12, _F.TYPE_DOUBLE),
    ("half_val", 13, _F.TYPE_INT32), ("uint32_val", 16, _F.TYPE_UINT32),
    ("uint64_val", 17, _F.TYPE_UINT64),
]  # fmt: skip
# message -> [(field, number, type, label, message type)]; `kind` fields form a oneof
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "BytesList": [("value", 1, _F.TYPE_BYTES, _REPEATED, None)],
    "FloatList": [("value", 1, _F.TYPE_FLOAT, _REPEATED, None)],
    "Int64List": [("value", 1, _F.TYPE_INT64, _REPEATED, None)],
    "Feature": [
        ("bytes_list", 1, _F.TYPE_MESSAGE, _OPTIONAL, "BytesList"),
        ("float_list", 2, _F.TYPE_MESSAGE, _OPTIONAL, "FloatList"),
        ("int64_list", 3, _F.TYPE_MESSAGE, _OPTIONAL, "Int64List"),
    ],
    "Features": [("feature", 1, _F.TYPE_MESSAGE, _REPEATED, "Features.FeatureEntry")],
    "Example": [("features", 1, _F.TYPE_MESSAGE, _OPTIONAL, "Features")],
    # ModelService.HandleReloadConfigRequest; `config` is a serialized ModelServerConfig
    # (tensorflow_serving.config's module, which needs no TensorFlow): the same bytes
    "ReloadConfigRequest": [("config", 1, _F.TYPE_BYTES, _OPTIONAL, None)],
    "StatusProto": [
        ("error_code", 1, _F.TYPE_INT32, _OPTIONAL, None),
        ("error_message", 2, _F.TYPE_STRING, _OPTIONAL, None),
    ],
    "ReloadConfigResponse": [("status", 1, _F.TYPE_MESSAGE, _OPTIONAL, "StatusProto")],
    "Int64Value": [("value", 1, _F.TYPE_INT64, _OPTIONAL, None)],
    "Dim": [
        ("size", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("name", 2, _F.TYPE_STRING, _OPTIONAL, None),
    ],
    "TensorShapeProto": [
        ("dim", 2, _F.TYPE_MESSAGE, _REPEATED, "Dim"),
        ("unknown_rank", 3, _F.TYPE_BOOL, _OPTIONAL, None),
    ],
    "TensorProto": [
        ("dtype", 1, _F.TYPE_INT32, _OPTIONAL, None),  # enum DataType: a varint on the wire
        ("tensor_shape", 2, _F.TYPE_MESSAGE, _OPTIONAL, "TensorShapeProto"),
        ("version_number", 3, _F.TYPE_INT32, _OPTIONAL, None),
        ("tensor_content", 4, _F.TYPE_BYTES, _OPTIONAL, None),
        *[(name, number, kind, _REPEATED, None) for name, number, kind in _TENSOR_VALUES],
    ],
    "ModelSpec": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("version", 2, _F.TYPE_MESSAGE, _OPTIONAL, "Int64Value"),
        ("signature_name", 3, _F.TYPE_STRING, _OPTIONAL, None),
        ("version_label", 4, _F.TYPE_STRING, _OPTIONAL, None),
    ],
    "PredictRequest": [
        ("model_spec", 1, _F.TYPE_MESSAGE, _OPTIONAL, "ModelSpec"),
        ("inputs", 2, _F.TYPE_MESSAGE, _REPEATED, "PredictRequest.InputsEntry"),
        ("output_filter", 3, _F.TYPE_STRING, _REPEATED, None),
    ],
    "PredictResponse": [
        ("outputs", 1, _F.TYPE_MESSAGE, _REPEATED, "PredictResponse.OutputsEntry"),
        ("model_spec", 2, _F.TYPE_MESSAGE, _OPTIONAL, "ModelSpec"),
    ],
}
_MAPS = {  # message -> (entry name, value type) of its map<string, value> field
    "PredictRequest": ("InputsEntry", "TensorProto"),
    "PredictResponse": ("OutputsEntry", "TensorProto"),
    "Features": ("FeatureEntry", "Feature"),
}
_ONEOFS = {"Feature": "kind"}


def _add_fields(message: descriptor_pb2.DescriptorProto, fields) -> None:
    for name, number, kind, label, type_name in fields:
        field = message.field.add(name=name, number=number, type=kind, label=label)
        if type_name is not None:
            field.type_name = f".{_PACKAGE}.{type_name}"


def _build_pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(
        name="sagemaker_serving/tfs_wire.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        _add_fields(message, fields)
        if name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[name])
            for field in message.field:
                field.oneof_index = 0
        if name in _MAPS:
            entry_name, value_type = _MAPS[name]
            entry = message.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            _add_fields(
                entry,
                [
                    ("key", 1, _F.TYPE_STRING, _OPTIONAL, None),
                    ("value", 2, _F.TYPE_MESSAGE, _OPTIONAL, value_type),
                ],
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_POOL = _build_pool()


def _message_class(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


PredictRequest = _message_class("PredictRequest")
PredictResponse = _message_class("PredictResponse")
TensorProto = _message_class("TensorProto")
Example = _message_class("Example")
ReloadConfigRequest = _message_class("ReloadConfigRequest")
ReloadConfigResponse = _message_class("ReloadConfigResponse")

# DataType enum values (tensorflow/core/framework/types.proto): each one's name, numpy dtype
# and the repeated TensorProto field holding its values when tensor_content is empty
DT_STRING = 7
_TYPES: dict[int, tuple[str, Any, str]] = {
    1: ("DT_FLOAT", np.float32, "float_val"),
    2: ("DT_DOUBLE", np.float64, "double_val"),
    3: ("DT_INT32", np.int32, "int_val"),
    4: ("DT_UINT8", np.uint8, "int_val"),
    5: ("DT_INT16", np.int16, "int_val"),
    6: ("DT_INT8", np.int8, "int_val"),
    DT_STRING: ("DT_STRING", np.object_, "string_val"),
    9: ("DT_INT64", np.int64, "int64_val"),
    10: ("DT_BOOL", np.bool_, "bool_val"),
    17: ("DT_UINT16", np.uint16, "int_val"),
    19: ("DT_HALF", np.float16, "half_val"),
    22: ("DT_UINT32", np.uint32, "uint32_val"),
    23: ("DT_UINT64", np.uint64, "uint64_val"),
}
DTYPE_ENUM_NAMES = {enum: name for enum, (name, _, _) in _TYPES.items()}
DTYPE_NAMES = {name: enum for enum, name in DTYPE_ENUM_NAMES.items()}
_ENUMS = {np.dtype(kind): enum for enum, (_, kind, _) in _TYPES.items() if enum != DT_STRING}


class UnsupportedTensor(ValueError):
    """A dtype this module does not convert (complex, resource, variant, bfloat16 ...)."""


def numpy_dtype(enum: int) -> Any:
    """The numpy dtype of a DataType enum value (object for DT_STRING)."""
    if enum not in _TYPES:
        raise UnsupportedTensor(f"DataType {enum} is not supported here")
    return _TYPES[enum][1]


def tensor_proto(array: np.ndarray, out: Any) -> memoryview | None:
    """Fill TensorProto `out` from `array`: bytes as string_val; numbers are its
    tensor_content, returned (little-endian, contiguous) for the caller to write after `out`'s
    other fields (protobuf takes fields in any order), so they are copied once, not three
    times (an asynchronous endpoint's tensor is up to 1 GiB)."""
    if array.dtype.kind in "OSU":
        tensor_head(array.shape, DT_STRING, out)
        out.string_val.extend(
            item.encode() if isinstance(item, str) else bytes(item) for item in array.flat
        )
        return None
    tensor_head(array.shape, tensor_dtype(array.dtype), out)
    content = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return content.reshape(-1).view(np.uint8).data


def tensor_dtype(dtype: np.dtype) -> int:
    """The DataType enum value of a numeric numpy dtype (either byte order)."""
    enum = _ENUMS.get(dtype.newbyteorder("="))
    if enum is None:
        raise UnsupportedTensor(f"numpy dtype {dtype} has no TensorFlow DataType here")
    return enum


def tensor_head(shape: tuple[int, ...], enum: int, out: Any) -> Any:
    """TensorProto `out` with its dtype and shape (its values are written after it)."""
    for size in shape:
        out.tensor_shape.dim.add(size=size)
    out.dtype = enum
    return out


def _length_delimited(number: int, size: int) -> bytes:
    """A length-delimited field's tag and length (the `size` bytes of its value follow)."""
    return _varint(number << 3 | 2) + _varint(size)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def to_numpy(proto: Any) -> np.ndarray:
    """A TensorProto as a numpy array (DT_STRING: an object array of bytes)."""
    shape = tuple(dim.size for dim in proto.tensor_shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    if proto.dtype == DT_STRING:
        values = np.empty(len(proto.string_val), dtype=object)
        values[:] = list(proto.string_val)
        return _filled(values, shape, count)
    kind = np.dtype(numpy_dtype(proto.dtype))
    if proto.tensor_content:
        return np.frombuffer(proto.tensor_content, dtype=kind.newbyteorder("<")).reshape(shape)
    field = getattr(proto, _TYPES[proto.dtype][2])
    if proto.dtype == 19:  # half_val holds the float16 bit patterns
        values = np.array(field, dtype=np.uint16).view(np.float16)
    else:
        values = np.array(field, dtype=kind)
    return _filled(values, shape, count)


def _filled(values: np.ndarray, shape: tuple[int, ...], count: int) -> np.ndarray:
    """TensorFlow's rule: fewer values than elements repeat the last one."""
    if values.size == count:
        return values.reshape(shape)
    if values.size == 0 or values.size > count:
        raise UnsupportedTensor(f"TensorProto holds {values.size} values for shape {shape}")
    return np.concatenate([values, np.repeat(values[-1:], count - values.size)]).reshape(shape)


def predict_request(
    model: str,
    version: int | None,
    signature: str | None,
    inputs: Mapping[str, np.ndarray],
) -> bytes:
    """A serialized PredictRequest."""
    pieces: list[bytes | memoryview] = [_request_spec(model, version, signature)]
    for name, array in inputs.items():
        tensor = TensorProto()
        content = tensor_proto(array, tensor)
        size = len(content) if content is not None else 0
        pieces += _input_entry(name, tensor, size)
        if size:
            pieces.append(content)  # type: ignore[arg-type]
    return b"".join(pieces)


def predict_head(
    model: str, version: int | None, name: str, tensor: Any, content_size: int
) -> bytes:
    """A serialized PredictRequest of one input, `tensor`, up to its tensor_content: the
    `content_size` bytes of that follow it (they are sent as they arrive: grpc_stream.py)."""
    return b"".join(
        [_request_spec(model, version, None), *_input_entry(name, tensor, content_size)]
    )


def _request_spec(model: str, version: int | None, signature: str | None) -> bytes:
    request = PredictRequest()
    request.model_spec.name = model
    if version is not None:
        request.model_spec.version.value = version
    if signature:
        request.model_spec.signature_name = signature
    return request.SerializeToString()


def _input_entry(name: str, tensor: Any, content_size: int) -> list[bytes]:
    """An inputs map entry (key 1, value 2, in field 2) up to the value's tensor_content (4)
    of `content_size` bytes, which the caller writes after it."""
    value = [tensor.SerializeToString()]
    if content_size:
        value.append(_length_delimited(4, content_size))
    key = name.encode()
    entry = [_length_delimited(1, len(key)), key]
    entry += [_length_delimited(2, sum(map(len, value)) + content_size), *value]
    return [_length_delimited(2, sum(map(len, entry)) + content_size), *entry]


def predict_outputs(data: bytes) -> dict[str, np.ndarray]:
    """The outputs of a serialized PredictResponse, by name."""
    response = PredictResponse.FromString(data)
    return {name: to_numpy(proto) for name, proto in response.outputs.items()}
