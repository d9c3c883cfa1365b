"""The tensor side of batching: one batch's inputs merged, its outputs split back into rows.

Follows BatchingSession: inputs are checked (ComputeTensorBatchSize), padded to a common
shape when pad_variable_length_inputs is on, concatenated along dimension 0 and padded with
rows up to the next allowed batch size; each output is sliced back into the callers' rows.
Error texts are TF's (batching_session.cc, batching_util.cc).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.errors import failed_precondition, internal, invalid_argument

_NO_INPUTS = "Batching Run() must have at least one input tensor"
_SCALAR_INPUT = "Batching Run() input tensors must have at least one dimension"
_UNEQUAL_DIM0 = "Batching Run() input tensors must have equal 0th-dimension size"
_SHAPES_DIFFER = (
    "Tensors with name '{name}' from different tasks have different shapes and padding is"
    " turned off. Set pad_variable_length_inputs to true, or ensure that all tensors with"
    " the same name have equal dimensions starting with the first dim."
)
_PAD_RANK = "Only tensors with rank from 1 to 6 can be padded."
_PAD_EMPTY = "Got empty tensor in batch of non-empty tensors."
_NOT_CONFORMING = "One or more tasks does not conform to batch signature"
_OUTPUT_SCALAR = "Batched output tensor has 0 dimensions"
_OUTPUT_DIM0 = (
    "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension"
    " sizes of the input tensors"
)

_MAX_PAD_RANK = 6


def task_size(inputs: Mapping[str, np.ndarray]) -> int:
    """Dimension 0 shared by all inputs (ComputeTensorBatchSize)."""
    if not inputs:
        raise invalid_argument(_NO_INPUTS)
    size = None
    for tensor in inputs.values():
        if tensor.ndim == 0:
            raise invalid_argument(_SCALAR_INPUT)
        if size is None:
            size = tensor.shape[0]
        elif tensor.shape[0] != size:
            raise invalid_argument(_UNEQUAL_DIM0)
    assert size is not None
    return int(size)


def round_to_allowed_batch_size(allowed: tuple[int, ...], size: int) -> int:
    """The first allowed size >= size, size itself if none is (RoundToLowestAllowedBatchSize)."""
    for candidate in allowed:
        if candidate >= size:
            return candidate
    return size


def _pad_to(tensor: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Pad every non-batch dim of tensor up to dims with its first element (AddPadding)."""
    if tensor.ndim > _MAX_PAD_RANK:
        raise invalid_argument(_PAD_RANK)
    shape = (tensor.shape[0], *dims)
    if shape == tensor.shape:
        return tensor
    if tensor.size == 0:
        if 0 in shape:
            return np.empty(shape, tensor.dtype)
        raise invalid_argument(_PAD_EMPTY)
    padded = np.full(shape, tensor.flat[0], dtype=tensor.dtype)
    padded[tuple(slice(0, d) for d in tensor.shape)] = tensor
    return padded


def _pad_variable_length(name: str, tensors: list[np.ndarray]) -> list[np.ndarray]:
    rank = tensors[0].ndim
    if any(t.ndim != rank for t in tensors):
        raise internal(
            f"Tensor concat operation failed: tensors named '{name}' have different ranks"
        )
    dims = tuple(int(d) for d in np.max([t.shape[1:] for t in tensors], axis=0))
    return [_pad_to(t, dims) for t in tensors]


def _check_equal_shapes(name: str, tensors: list[np.ndarray]) -> None:
    reference = tensors[0].shape[1:]
    for tensor in tensors[1:]:
        if tensor.shape[1:] != reference:
            raise failed_precondition(_SHAPES_DIFFER.format(name=name))


def _padding_rows(tensors: list[np.ndarray], count: int) -> np.ndarray | None:
    """count copies of the first row of the last task that has rows (MergeInputTensors)."""
    for tensor in reversed(tensors):
        if tensor.shape[0]:
            return np.repeat(tensor[:1], count, axis=0)
    return None


def merge_inputs(
    inputs: Sequence[Mapping[str, np.ndarray]], sizes: Sequence[int], options: BatchingOptions
) -> tuple[dict[str, np.ndarray], int]:
    """Concatenate the tasks' inputs (each of task_size() sizes[i]); returns them and the
    padded batch size."""
    names = inputs[0].keys()
    if any(task.keys() != names for task in inputs[1:]):
        raise internal(_NOT_CONFORMING)
    size = sum(sizes)
    padded_size = round_to_allowed_batch_size(options.allowed_batch_sizes, size)
    merged: dict[str, np.ndarray] = {}
    for name in names:
        tensors = [task[name] for task in inputs]
        if options.pad_variable_length_inputs:
            tensors = _pad_variable_length(name, tensors)
        else:
            _check_equal_shapes(name, tensors)
        if padded_size > size:
            rows = _padding_rows(tensors, padded_size - size)
            if rows is not None:
                tensors.append(rows)
        merged[name] = tensors[0] if len(tensors) == 1 else np.concatenate(tensors)
    if padded_size > size and not size:
        padded_size = size  # nothing to pad with
    return merged, padded_size


def split_outputs(
    outputs: Mapping[str, np.ndarray], sizes: Sequence[int], padded_size: int
) -> list[dict[str, np.ndarray]]:
    """Slice each batched output into the tasks' rows, dropping padding rows."""
    results: list[dict[str, np.ndarray]] = [{} for _ in sizes]
    for name, tensor in outputs.items():
        if not isinstance(tensor, np.ndarray):
            tensor = np.asarray(tensor)
        if tensor.ndim == 0:
            raise failed_precondition(_OUTPUT_SCALAR)
        if tensor.shape[0] != padded_size:
            raise failed_precondition(_OUTPUT_DIM0)
        start = 0
        for result, size in zip(results, sizes, strict=True):
            result[name] = tensor[start : start + size]
            start += size
    return results
