"""TensorProto <-> numpy, with TF Serving's conventions for gRPC responses.

TF Serving fills responses with Tensor::AsProtoField (typed value fields such as float_val),
not tensor_content; requests may use either form.
"""

from __future__ import annotations

import numpy as np
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

from tfs_model_server import tf_runtime
from tfs_model_server.errors import invalid_argument

_FIELD_BY_DTYPE = {
    types_pb2.DT_FLOAT: "float_val",
    types_pb2.DT_DOUBLE: "double_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_INT16: "int_val",
    types_pb2.DT_INT8: "int_val",
    types_pb2.DT_UINT8: "int_val",
    types_pb2.DT_UINT16: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_UINT32: "uint32_val",
    types_pb2.DT_UINT64: "uint64_val",
    types_pb2.DT_BOOL: "bool_val",
    types_pb2.DT_STRING: "string_val",
    types_pb2.DT_HALF: "half_val",
}


def to_ndarray(
    proto: tensor_pb2.TensorProto, alias: str = "", content: memoryview | None = None
) -> np.ndarray:
    """Decode a request tensor, whose tensor_content is `content` when it was read apart
    (api/predict_wire.py: numbers are then read in place, not copied); malformed protos are
    INVALID_ARGUMENT 'tensor parsing error'."""
    try:
        if content is not None:
            dtype = np.dtype(tf_runtime.as_dtype(proto.dtype).as_numpy_dtype)
            if dtype.hasobject:
                proto.tensor_content = bytes(content)
            else:
                shape = [dim.size for dim in proto.tensor_shape.dim]
                return np.frombuffer(content, dtype=dtype).reshape(shape)
        return tf_runtime.make_ndarray(proto)
    except Exception as exc:
        raise invalid_argument(f"tensor parsing error: {alias}") from exc


def to_proto(array: np.ndarray) -> tensor_pb2.TensorProto:
    """Encode an output tensor the way TF Serving's Predict does (AsProtoField)."""
    array = np.asarray(array)
    dtype = tf_runtime.as_dtype(
        array.dtype if array.dtype != object else tf_runtime.string
    ).as_datatype_enum
    proto = tensor_pb2.TensorProto(
        dtype=dtype,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in array.shape]
        ),
    )
    field = _FIELD_BY_DTYPE.get(dtype)
    if field is None:
        proto.tensor_content = np.ascontiguousarray(array).tobytes()
        return proto
    flat = array.reshape(-1)
    if dtype == types_pb2.DT_STRING:
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in flat)
    elif dtype == types_pb2.DT_HALF:
        proto.half_val.extend(flat.view(np.uint16).astype(np.int32).tolist())
    else:
        getattr(proto, field).extend(flat.tolist())
    return proto
