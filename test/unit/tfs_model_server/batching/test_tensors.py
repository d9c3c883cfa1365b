"""batching.tensors: one batch's inputs merged (with padding) and its outputs split back."""

from __future__ import annotations

import numpy as np
import pytest

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.batching.tensors import (
    merge_inputs,
    round_to_allowed_batch_size,
    split_outputs,
    task_size,
)
from tfs_model_server.errors import Code, ServingError


def _merge(inputs: list[dict[str, np.ndarray]], **options: object) -> tuple[dict, int]:
    sizes = [task_size(task) for task in inputs]
    return merge_inputs(inputs, sizes, BatchingOptions(**options))  # type: ignore[arg-type]


def test_round_to_allowed_batch_size() -> None:
    assert round_to_allowed_batch_size((), 3) == 3
    assert round_to_allowed_batch_size((2, 4, 8), 3) == 4
    assert round_to_allowed_batch_size((2, 4, 8), 8) == 8
    assert round_to_allowed_batch_size((2, 4, 8), 9) == 9


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "Batching Run() must have at least one input tensor"),
        ({"x": np.float32(1)}, "Batching Run() input tensors must have at least one dimension"),
        (
            {"a": np.zeros(2), "b": np.zeros(3)},
            "Batching Run() input tensors must have equal 0th-dimension size",
        ),
    ],
)
def test_task_size_checks(inputs, message) -> None:
    with pytest.raises(ServingError) as e:
        task_size(inputs)
    assert (e.value.code, e.value.message) == (Code.INVALID_ARGUMENT, message)


def test_merge_concatenates_in_task_order() -> None:
    merged, size = _merge(
        [
            {"x": np.array([[1], [2]]), "s": np.array([b"a", b"b"], object)},
            {"x": np.array([[3]]), "s": np.array([b"c"], object)},
        ]
    )
    assert size == 3
    assert merged["x"].ravel().tolist() == [1, 2, 3]
    assert merged["s"].tolist() == [b"a", b"b", b"c"]


def test_merge_pads_to_the_next_allowed_size_with_the_first_row_of_the_last_task() -> None:
    merged, size = _merge(
        [{"x": np.array([1, 2])}, {"x": np.array([3])}],
        max_batch_size=8,
        allowed_batch_sizes=(2, 4, 8),
    )
    assert size == 4
    assert merged["x"].tolist() == [1, 2, 3, 3]


def test_merge_of_empty_tasks_has_nothing_to_pad_with() -> None:
    merged, size = _merge([{"x": np.zeros((0, 2))}], max_batch_size=4, allowed_batch_sizes=(4,))
    assert size == 0
    assert merged["x"].shape == (0, 2)


def test_merge_pads_variable_length_inputs_with_their_first_element() -> None:
    merged, _ = _merge(
        [
            {"x": np.array([[7, 8, 9]], np.int32), "s": np.array([[b"a"]], object)},
            {
                "x": np.arange(10, dtype=np.int32).reshape(2, 5),
                "s": np.array([[b"b", b"c"]] * 2, object),
            },
        ],
        pad_variable_length_inputs=True,
    )
    assert merged["x"].tolist() == [[7, 8, 9, 7, 7], [0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert merged["s"].tolist() == [[b"a", b"a"], [b"b", b"c"], [b"b", b"c"]]


@pytest.mark.parametrize(
    ("inputs", "options", "code", "message"),
    [
        (
            [{"x": np.zeros((1, 3))}, {"x": np.zeros((1, 5))}],
            {},
            Code.FAILED_PRECONDITION,
            "Tensors with name 'x' from different tasks have different shapes and padding is "
            "turned off. Set pad_variable_length_inputs to true, or ensure that all tensors "
            "with the same name have equal dimensions starting with the first dim.",
        ),
        (
            [{"x": np.zeros((1,) * 7)}],
            {"pad_variable_length_inputs": True},
            Code.INVALID_ARGUMENT,
            "Only tensors with rank from 1 to 6 can be padded.",
        ),
        (
            [{"x": np.zeros((1, 0))}, {"x": np.zeros((1, 2))}],
            {"pad_variable_length_inputs": True},
            Code.INVALID_ARGUMENT,
            "Got empty tensor in batch of non-empty tensors.",
        ),
        (
            [{"x": np.zeros((1, 2))}, {"x": np.zeros((1, 2, 2))}],
            {"pad_variable_length_inputs": True},
            Code.INTERNAL,
            "Tensor concat operation failed: tensors named 'x' have different ranks",
        ),
        (
            [{"x": np.zeros(1)}, {"y": np.zeros(1)}],
            {},
            Code.INTERNAL,
            "One or more tasks does not conform to batch signature",
        ),
    ],
)
def test_merge_errors(inputs, options, code, message) -> None:
    with pytest.raises(ServingError) as e:
        _merge(inputs, **options)
    assert (e.value.code, e.value.message) == (code, message)


def test_split_gives_each_task_its_rows_and_drops_padding() -> None:
    outputs = {"y": np.arange(8).reshape(4, 2), "z": np.array([b"a", b"b", b"c", b"pad"], object)}
    first, second = split_outputs(outputs, [2, 1], 4)
    assert first["y"].tolist() == [[0, 1], [2, 3]] and first["z"].tolist() == [b"a", b"b"]
    assert second["y"].tolist() == [[4, 5]] and second["z"].tolist() == [b"c"]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (
            {"y": np.zeros(3)},
            "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension "
            "sizes of the input tensors",
        ),
        ({"y": np.float32(1)}, "Batched output tensor has 0 dimensions"),
    ],
)
def test_split_checks_the_outputs(outputs, message) -> None:
    with pytest.raises(ServingError) as e:
        split_outputs(outputs, [1, 1], 2)
    assert (e.value.code, e.value.message) == (Code.FAILED_PRECONDITION, message)
