"""A serving signature's inputs and outputs from TF Serving's model metadata JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.tfs_client.wire import DTYPE_ENUM_NAMES  # TF's protos' wire subset

__all__ = ["InputSpec", "signature_inputs", "signature_outputs", "string_inputs"]


@dataclass(frozen=True)
class InputSpec:
    """One signature input: alias, dtype name, shape (-1: unknown dim; None: unknown rank)."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None


def signature_inputs(
    metadata: dict, signature_name: str = "serving_default"
) -> dict[str, InputSpec]:
    """Inputs of one signature from TF Serving's GET /v1/models/<m>/metadata JSON, by alias.

    InputSpec.name is the alias (the key requests use), not the graph tensor name.
    """
    return _signature_tensors(metadata, signature_name, "inputs")


def signature_outputs(
    metadata: dict, signature_name: str = "serving_default"
) -> dict[str, InputSpec]:
    """Outputs of one signature, by alias (the names TF Serving responses use)."""
    return _signature_tensors(metadata, signature_name, "outputs")


def string_inputs(inputs: Mapping[str, InputSpec]) -> list[str]:
    """The names of the DT_STRING inputs."""
    return [name for name, spec in inputs.items() if spec.dtype == "DT_STRING"]


def _dim(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


def _dtype_name(value: Any) -> str:
    if isinstance(value, int):
        return DTYPE_ENUM_NAMES.get(value, f"DataType {value}")
    return str(value) if value else "DT_INVALID"


def _signature_tensors(metadata: dict, signature_name: str, side: str) -> dict[str, InputSpec]:
    try:
        signatures = metadata["metadata"]["signature_def"]["signature_def"]
    except (KeyError, TypeError) as err:
        raise ValueError(f"model metadata has no signature_def: {err!r}") from None
    if signature_name not in signatures:
        available = ", ".join(sorted(signatures)) or "none"
        raise PayloadError(
            f'Serving signature name: "{signature_name}" not found in signature def '
            f"(available: {available})",
            400,
        )
    specs: dict[str, InputSpec] = {}
    for alias, info in (signatures[signature_name].get(side) or {}).items():
        shape_info = info.get("tensor_shape")
        shape: tuple[int, ...] | None
        if shape_info is None or shape_info.get("unknown_rank"):
            shape = None
        else:
            shape = tuple(_dim(d.get("size")) for d in shape_info.get("dim") or ())
        specs[alias] = InputSpec(alias, _dtype_name(info.get("dtype")), shape)
    return specs
