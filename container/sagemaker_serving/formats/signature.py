"""A serving signature's inputs and outputs from TF Serving's model metadata JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.tfs_client.wire import DTYPE_ENUM_NAMES  # TF's protos' wire subset

__all__ = ["InputSpec", "signature", "single_string_input", "string_inputs"]


@dataclass(frozen=True)
class InputSpec:
    """One signature input: alias, dtype name, shape (-1: unknown dim; None: unknown rank)."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None


def signature(
    metadata: dict, name: str = "serving_default"
) -> tuple[dict[str, InputSpec], dict[str, InputSpec]]:
    """The (inputs, outputs) of one signature from TF Serving's GET /v1/models/<m>/metadata
    JSON, by alias (the key requests and answers use, not the graph tensor name)."""
    try:
        signatures = metadata["metadata"]["signature_def"]["signature_def"]
    except (KeyError, TypeError) as err:
        raise ValueError(f"model metadata has no signature_def: {err!r}") from None
    if name not in signatures:
        # __saved_model_init_op is TensorFlow's, no signature a request can name
        available = ", ".join(sorted(s for s in signatures if not s.startswith("__"))) or "none"
        raise PayloadError(
            f'Serving signature name: "{name}" not found in signature def (available: {available})',
            400,
        )
    chosen = signatures[name]
    return _tensors(chosen.get("inputs")), _tensors(chosen.get("outputs"))


def string_inputs(inputs: Mapping[str, InputSpec]) -> list[str]:
    """The names of the DT_STRING inputs."""
    return [name for name, spec in inputs.items() if spec.dtype == "DT_STRING"]


def single_string_input(inputs: Mapping[str, InputSpec]) -> str | None:
    """The name of the model's only input when it is DT_STRING, else None."""
    if len(inputs) == 1:
        (spec,) = inputs.values()
        if spec.dtype == "DT_STRING":
            return spec.name
    return None


def _dim(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


def _dtype_name(value: Any) -> str:
    if isinstance(value, int):
        return DTYPE_ENUM_NAMES.get(value, f"DataType {value}")
    return str(value) if value else "DT_INVALID"


def _tensors(side: dict | None) -> dict[str, InputSpec]:
    specs: dict[str, InputSpec] = {}
    for alias, info in (side or {}).items():
        shape_info = info.get("tensor_shape")
        shape: tuple[int, ...] | None
        if shape_info is None or shape_info.get("unknown_rank"):
            shape = None
        else:
            shape = tuple(_dim(d.get("size")) for d in shape_info.get("dim") or ())
        specs[alias] = InputSpec(alias, _dtype_name(info.get("dtype")), shape)
    return specs
