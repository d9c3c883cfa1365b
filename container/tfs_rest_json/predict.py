"""TF Serving's predict response: the row ("instances") and columnar ("inputs") layouts, as
rapidjson's PrettyWriter writes them."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tfs_rest_json.numbers import float32_joined, float64_tokens
from tfs_rest_json.strings import TensorJsonError, indent, json_string, utf8


def _b64_token(data: bytes, depth: int) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return f'{{\n{indent(depth + 1)}"b64": "{encoded}"\n{indent(depth)}}}'


def _as_bytes(value: Any) -> bytes:
    return utf8(value) if isinstance(value, str) else bytes(value)


def _tokens(flat: np.ndarray, as_b64: bool, depth: int) -> list[str]:
    """AddSingleValueAndAdvance() for every element of a vector (float32 aside)."""
    kind = flat.dtype.kind
    if flat.dtype == np.float64:
        return float64_tokens(flat)
    if kind == "i" or (kind == "u" and flat.dtype != np.uint16):
        return list(map(str, flat.tolist()))
    if kind == "b":
        return ["true" if value else "false" for value in flat.tolist()]
    if kind in "OSU":
        if as_b64:
            return [_b64_token(_as_bytes(value), depth) for value in flat.tolist()]
        return [json_string(_as_bytes(value)) for value in flat.tolist()]
    if flat.size == 0:
        return []
    name = {"float16": "half"}.get(flat.dtype.name, flat.dtype.name)
    raise TensorJsonError(f"Failed to write JSON value for tensor type: {name}")


def _joined(array: np.ndarray, as_b64: bool, depth: int, group: int, sep: str) -> list[str]:
    """Texts of the elements (written at `depth`), `group` per string, joined by `sep`."""
    flat = array.reshape(-1)
    if flat.dtype == np.float32:
        return float32_joined(flat, group, sep)
    tokens = _tokens(flat, as_b64, depth)
    if group == 1:
        return tokens
    return [sep.join(tokens[i : i + group]) for i in range(0, len(tokens), group)]


def _texts(
    array: np.ndarray, as_b64: bool, depth: int, single_line: bool, batch: bool
) -> list[str]:
    """AddTensorValues(): the JSON text of each array[i] (batch) or of the array, as values
    written at nesting `depth`."""
    dims = array.shape[1:] if batch else array.shape
    count = array.shape[0] if batch else 1
    if not dims:
        return _joined(array, as_b64, depth, 1, "")
    items: list[str] | None = None
    for axis in range(len(dims) - 1, -1, -1):
        size, outer = dims[axis], count * math.prod(dims[:axis])
        if single_line:
            head, sep, tail = "[", ", ", "]"
        else:
            inner = "\n" + indent(depth + axis + 1)
            head, sep, tail = "[" + inner, "," + inner, "\n" + indent(depth + axis) + "]"
        if size == 0:
            items = ["[]"] * outer
            continue
        if items is None:
            groups = _joined(array, as_b64, depth + axis + 1, size, sep) if outer else []
        else:
            rows = iter(items)
            groups = [sep.join(row) for row in zip(*[rows] * size, strict=True)]
        items = [head + group + tail for group in groups]
    assert items is not None  # dims is not empty: the loop ran
    return items


def _is_bytes_output(name: str, array: np.ndarray) -> bool:
    """IsNamedTensorBytes()."""
    return array.dtype.kind in "OSU" and name.endswith("_bytes")


def _row_format(outputs: dict[str, np.ndarray]) -> str:
    """MakeRowFormatJsonFromTensors(): single-line values, one per batch item."""
    batch = -1
    for name, array in outputs.items():
        if array.ndim == 0:
            raise TensorJsonError(f"Tensor name: {name} has no shape information ")
        if batch >= 0 and array.shape[0] != batch:
            raise TensorJsonError(
                f"Tensor name: {name} has inconsistent batch size: "
                f"{array.shape[0]} expecting: {batch}"
            )
        batch = array.shape[0]
    if batch == 0:
        return '{\n    "predictions": []\n}'
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        body = _texts(array, _is_bytes_output(name, array), 1, True, False)[0][1:-1]
        return '{\n    "predictions": [' + body + "\n    ]\n}"
    columns = [
        (
            indent(3) + json_string(name) + ": ",
            _texts(array, _is_bytes_output(name, array), 3, True, True),
        )
        for name, array in outputs.items()
    ]
    objects = [
        "{\n" + ",\n".join(key + items[i] for key, items in columns) + "\n" + indent(2) + "}"
        for i in range(batch)
    ]
    separator = ",\n" + indent(2)
    return '{\n    "predictions": [\n' + indent(2) + separator.join(objects) + "\n    ]\n}"


def _columnar_format(outputs: dict[str, np.ndarray]) -> str:
    """MakeColumnarFormatJsonFromTensors(): a bare value for one output, else an object."""
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        return (
            '{\n    "outputs": '
            + _texts(array, _is_bytes_output(name, array), 1, False, False)[0]
            + "\n}"
        )
    members = [
        indent(2)
        + json_string(name)
        + ": "
        + _texts(array, _is_bytes_output(name, array), 2, False, False)[0]
        for name, array in outputs.items()
    ]
    return '{\n    "outputs": {\n' + ",\n".join(members) + "\n    }\n}"


def predict_response(outputs: Mapping[str, np.ndarray], row_format: bool) -> bytes:
    """MakeJsonFromTensors(): {"predictions": ...} (row) or {"outputs": ...} (columnar)."""
    if not outputs:
        raise TensorJsonError("Cannot convert empty tensor map to JSON")
    arrays = {name: np.asarray(outputs[name]) for name in sorted(outputs)}
    text = _row_format(arrays) if row_format else _columnar_format(arrays)
    return utf8(text)
