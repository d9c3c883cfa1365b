"""Description of one input or output of a signature, shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass

from tensorflow.core.framework import types_pb2


@dataclass(frozen=True)
class TensorSpec:
    """One entry of a SignatureDef's inputs or outputs.

    alias: the signature key (what clients name it), tensor_name: the graph tensor,
    dtype: a tensorflow.DataType enum number (types_pb2.DT_FLOAT, ...),
    shape: dims with None for unknown ones, or None when the rank is unknown.
    """

    alias: str
    tensor_name: str
    dtype: int
    shape: tuple[int | None, ...] | None


# DataTypeString() names used in TF Serving's error messages.
DTYPE_NAMES: dict[int, str] = {
    types_pb2.DT_FLOAT: "float",
    types_pb2.DT_DOUBLE: "double",
    types_pb2.DT_INT32: "int32",
    types_pb2.DT_UINT8: "uint8",
    types_pb2.DT_INT16: "int16",
    types_pb2.DT_INT8: "int8",
    types_pb2.DT_STRING: "string",
    types_pb2.DT_COMPLEX64: "complex64",
    types_pb2.DT_INT64: "int64",
    types_pb2.DT_BOOL: "bool",
    types_pb2.DT_BFLOAT16: "bfloat16",
    types_pb2.DT_UINT16: "uint16",
    types_pb2.DT_COMPLEX128: "complex128",
    types_pb2.DT_HALF: "half",
    types_pb2.DT_UINT32: "uint32",
    types_pb2.DT_UINT64: "uint64",
}
