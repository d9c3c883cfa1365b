"""Protos as TF Serving's REST status and metadata endpoints print them.


TF Serving prints protos with protobuf's pre-v22 C++ JSON printer (MessageToJsonString,
add_whitespace, always_print_primitive_fields): JsonObjectWriter's layout (one space of
indent per level, a newline after the root) and DefaultValueObjectWriter's field order.
That writer lays out, in declaration order, every field that is not a oneof primitive:
defaults for primitives, [] / {} for repeated fields and maps, set messages in place
(unset ones are skipped). Values it then receives as primitives and has no primitive
slot for go last, in field number order: set oneof primitives and wrapper messages
(google.protobuf.Int64Value ...), which are printed as their bare value.
"""

from __future__ import annotations

import base64
import json
import math
from itertools import chain
from typing import Any

import numpy as np
from google.protobuf import descriptor
from tensorflow_serving.apis import get_model_metadata_pb2

from tfs_model_server.errors import internal
from tfs_rest_json import decimal as _decimal
from tfs_rest_json import utf8 as _utf8

_FD = descriptor.FieldDescriptor
_WRAPPERS = {
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}
_INT64_TYPES = {
    _FD.TYPE_INT64,
    _FD.TYPE_UINT64,
    _FD.TYPE_SINT64,
    _FD.TYPE_FIXED64,
    _FD.TYPE_SFIXED64,
}
# JsonEscaping escapes these beyond what json.dumps does (HTML safety, invisible marks).
_PB_ESCAPES = {
    c: f"\\u{c:04x}"
    for c in chain(
        (0x3C, 0x3E, 0x7F, 0xAD, 0x6DD, 0x70F, 0x17B4, 0x17B5, 0xFEFF),
        range(0x80, 0xA0),
        range(0x600, 0x604),
        range(0x200B, 0x2010),
        range(0x2028, 0x202F),
        range(0x2060, 0x2065),
        range(0x206A, 0x2070),
        range(0xFFF9, 0xFFFC),
    )
}
_PB_ESCAPES.update(
    {
        c: json.dumps(chr(c))[1:-1]
        for c in chain((0xE0001,), range(0x1D173, 0x1D17B), range(0xE0020, 0xE0080))
    }
)


def _pb_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).translate(_PB_ESCAPES)


def _is_wrapper(field: descriptor.FieldDescriptor) -> bool:
    return field.type == _FD.TYPE_MESSAGE and field.message_type.full_name in _WRAPPERS


def _simple_float(value: float, is_float32: bool) -> str:
    """SimpleFtoa() / SimpleDtoa(); non-finite values as strings."""
    if not math.isfinite(value):
        return '"' + _decimal(value, False) + '"'
    text = format(value, ".6g" if is_float32 else ".15g")
    back = float(text)
    if (np.float32(back) != np.float32(value)) if is_float32 else back != value:
        text = format(value, ".9g" if is_float32 else ".17g")
    return text


def _pb_value(field: descriptor.FieldDescriptor, value: Any, level: int, names: bool) -> str:
    kind = field.type
    if _is_wrapper(field):
        return _pb_value(field.message_type.fields_by_name["value"], value.value, level, names)
    if kind == _FD.TYPE_MESSAGE:
        return _pb_object(value, level, names)
    if kind == _FD.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return _pb_string(enum_value.name) if enum_value else str(value)
    if kind in _INT64_TYPES:
        return f'"{value}"'
    if kind in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
        return _simple_float(value, kind == _FD.TYPE_FLOAT)
    if kind == _FD.TYPE_BOOL:
        return "true" if value else "false"
    if kind == _FD.TYPE_BYTES:
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if kind == _FD.TYPE_STRING:
        return _pb_string(value)
    return str(value)


def _pb_container(items: list[str], level: int, braces: str) -> str:
    if not items:
        return braces
    inner = "\n" + " " * (level + 1)
    return braces[0] + ",".join(inner + item for item in items) + "\n" + " " * level + braces[1]


def _pb_field(message: Any, field: descriptor.FieldDescriptor, level: int, names: bool) -> str:
    value = getattr(message, field.name)
    if field.message_type and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return _pb_container(
            [
                _pb_string(str(key).lower() if isinstance(key, bool) else str(key))
                + ": "
                + _pb_value(value_field, value[key], level + 1, names)
                for key in sorted(value)
            ],
            level,
            "{}",
        )
    if field.is_repeated:
        return _pb_container(
            [_pb_value(field, item, level + 1, names) for item in value], level, "[]"
        )
    return _pb_value(field, value, level, names)


def _pb_object(message: Any, level: int, names: bool) -> str:
    placed: list[descriptor.FieldDescriptor] = []
    late: list[descriptor.FieldDescriptor] = []
    for field in message.DESCRIPTOR.fields:
        if field.is_repeated or (field.type != _FD.TYPE_MESSAGE and field.containing_oneof is None):
            placed.append(field)
        elif message.HasField(field.name):
            late_field = field.type != _FD.TYPE_MESSAGE or _is_wrapper(field)
            (late if late_field else placed).append(field)
    fields = placed + sorted(late, key=lambda field: field.number)
    return _pb_container(
        [
            _pb_string(field.name if names else field.json_name)
            + ": "
            + _pb_field(message, field, level + 1, names)
            for field in fields
        ],
        level,
        "{}",
    )


def status_json(msg: Any) -> bytes:
    """GetModelStatusResponse as the REST status endpoint prints it (field json_names).

    TF Serving always sets each version's status (ToStatusProto(health)), so an unset
    status prints as {"error_code": "OK", "error_message": ""}.
    """
    copy = type(msg)()
    copy.CopyFrom(msg)
    msg = copy
    for version_status in msg.model_version_status:
        version_status.status.SetInParent()
    return _utf8(_pb_object(msg, 0, False) + "\n")


def metadata_json(msg: Any) -> bytes:
    """GetModelMetadataResponse as the REST metadata endpoint prints it (ToJsonString():
    model_spec and the unpacked SignatureDefMap printed apart, proto field names)."""
    if "signature_def" not in msg.metadata:
        raise internal(
            "Failed to find 'signature_def' key in the GetModelMetadataResponse metadata map."
        )
    signatures = get_model_metadata_pb2.SignatureDefMap()
    if not msg.metadata["signature_def"].Unpack(signatures):
        raise internal("Failed to unpack 'Any' object to 'SignatureDefMap'.")
    return _utf8(
        '{\n"model_spec":'
        + _pb_object(msg.model_spec, 0, True)
        + "\n,\n"
        + '"metadata": {"signature_def": '
        + _pb_object(signatures, 0, True)
        + "\n}\n}\n"
    )
