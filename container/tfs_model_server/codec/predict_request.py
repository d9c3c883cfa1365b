"""A predict request's JSON as input tensors: TF Serving's row ('instances') and columnar
('inputs') layouts (FillPredictRequestFromJson), with its error texts.

Maps in TF Serving are protobuf maps with no defined order; where that order shows (which
input is checked first) names are taken in sorted order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfs_model_server.codec.base64_objects import is_b64_object
from tfs_model_server.codec.request_object import format_error, request_object
from tfs_model_server.codec.tensors import as_tensor, exact_tensor, fast_tensor, make_array
from tfs_model_server.codec.value_text import value_to_string
from tfs_model_server.errors import ServingError, invalid_argument
from tfs_model_server.tensor_spec import TensorSpec


def _is_element_object(value: Any) -> bool:
    return isinstance(value, dict) and not is_b64_object(value)


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


class _Batch:
    """Per-input leaves and first-instance shape while walking 'instances' (AddInstanceItem)."""

    def __init__(self, specs: Mapping[str, TensorSpec]) -> None:
        self.specs = specs
        self.values: dict[str, list] = {}
        self.shapes: dict[str, tuple[int, list[int]]] = {}

    def add(self, item: Any, name: str) -> None:
        if name not in self.specs:
            raise invalid_argument(f"JSON object: does not have named input: {name}")
        values, shape = exact_tensor(item, self.specs[name].dtype)
        if name not in self.shapes:
            self.shapes[name] = (len(values), shape)
            self.values[name] = values
            return
        size, first = self.shapes[name]
        if size != len(values):
            raise invalid_argument(f"Expecting tensor size: {size} but got: {len(values)}")
        if first != shape:
            raise invalid_argument(
                f"Expecting shape {_shape_text(first)} but got: {_shape_text(shape)}"
            )
        self.values[name].extend(values)

    def arrays(self, count: int) -> dict[str, np.ndarray]:
        return {
            name: make_array(values, [count, *self.shapes[name][1]], self.specs[name].dtype)
            for name, values in self.values.items()
        }


def _exact_instances(
    instances: list, specs: Mapping[str, TensorSpec], objects: bool
) -> dict[str, np.ndarray]:
    """FillTensorMapFromInstancesList(), element by element, with TF Serving's errors."""
    batch = _Batch(specs)
    names = sorted(specs)
    for index, element in enumerate(instances):
        if objects:
            if not _is_element_object(element):
                raise invalid_argument(
                    f"Expecting object but got list at item {index} of input list"
                )
            for name, item in element.items():
                try:
                    batch.add(item, name)
                except ServingError as err:
                    raise invalid_argument(
                        f"Failed to process element: {index} key: {name} of 'instances' list. "
                        f"Error: {err.status_text()}"
                    ) from None
            if set(element) != set(names):
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{value_to_string(element)} keys must be equal to: {','.join(names)}"
                )
        else:
            if _is_element_object(element):
                raise invalid_argument(
                    f"Expecting value/list but got object at item {index} of input list"
                )
            try:
                batch.add(element, names[0])
            except ServingError as err:
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. "
                    f"Error: {err.status_text()}"
                ) from None
    return batch.arrays(len(instances))


def _fast_instances(
    instances: list, specs: Mapping[str, TensorSpec], objects: bool
) -> dict[str, np.ndarray] | None:
    names = sorted(specs)
    if not objects:
        array = fast_tensor(instances, specs[names[0]].dtype)
        return None if array is None else {names[0]: array}
    if "b64" in specs or set(map(type, instances)) != {dict}:
        return None
    if any(element.keys() != specs.keys() for element in instances):
        return None
    arrays = {}
    for name in names:
        array = fast_tensor([element[name] for element in instances], specs[name].dtype)
        if array is None:
            return None
        arrays[name] = array
    return arrays


def _from_instances(instances: list, specs: Mapping[str, TensorSpec]) -> dict[str, np.ndarray]:
    first = instances[0]
    if not isinstance(first, dict) and len(specs) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    objects = _is_element_object(first)
    arrays = _fast_instances(instances, specs, objects)
    return arrays if arrays is not None else _exact_instances(instances, specs, objects)


def _from_inputs(value: Any, specs: Mapping[str, TensorSpec]) -> dict[str, np.ndarray]:
    """FillTensorMapFromInputsMap()."""
    names = sorted(specs)
    if not isinstance(value, dict) or is_b64_object(value):
        if len(specs) > 1:
            raise invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map"
            )
        return {names[0]: as_tensor(value, specs[names[0]].dtype)}
    arrays = {}
    for name in names:
        if name not in value:
            raise invalid_argument(f"Missing named input: {name} in 'inputs' object.")
        arrays[name] = as_tensor(value[name], specs[name].dtype)
    return arrays


def predict_inputs(
    doc: dict, specs: Mapping[str, TensorSpec]
) -> tuple[dict[str, np.ndarray], bool]:
    """FillPredictRequestFromJson(): ({alias: ndarray}, row_format)."""
    request_object(doc)
    if not specs:
        raise invalid_argument(
            f"Failed to get input map for signature: {doc.get('signature_name') or 'DEFAULT'}"
        )
    try:
        if "instances" in doc:
            if "inputs" in doc:
                raise format_error(
                    doc,
                    "Not formatted correctly expecting only one of "
                    "'inputs' or 'instances' keys to exist ",
                )
            instances = doc["instances"]
            if not isinstance(instances, list):
                raise format_error(doc, "Expecting 'instances' to be an list/array")
            if not instances:
                raise format_error(doc, "No values in 'instances' array")
            return _from_instances(instances, specs), True
        if "inputs" in doc:
            return _from_inputs(doc["inputs"], specs), False
    except RecursionError:
        raise invalid_argument("JSON value is nested too deeply") from None
    raise invalid_argument("Missing 'inputs' or 'instances' key")
