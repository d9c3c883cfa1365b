"""core.inference: TF Serving's classify/regress signature checks and output conversions."""

from __future__ import annotations

import numpy as np
import pytest

from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.core.inference import (
    classifications,
    examples_tensor,
    inference_signature,
    regressions,
)
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD
from tfs_model_server.errors import Code, ServingError


def _message(call, *args) -> str:
    with pytest.raises(ServingError) as info:
        call(*args)
    assert info.value.code == Code.INVALID_ARGUMENT
    return info.value.message


def test_examples_follow_their_context() -> None:
    tensor = examples_tensor([b"a", b"b"], b"ctx:")
    assert tensor.dtype == object and tensor.tolist() == [b"ctx:a", b"ctx:b"]
    assert examples_tensor([b"a"], None).tolist() == [b"a"]
    assert _message(examples_tensor, [], b"ctx") == "Input is empty."


def test_signatures_of_a_real_model(plane: DataPlane) -> None:
    with plane.manager.servable("half_plus_two") as servable:
        assert inference_signature(servable, "classify_x_to_y", CLASSIFY_METHOD, True).key == (
            "classify_x_to_y"
        )
        assert inference_signature(servable, "regress_x_to_y", REGRESS_METHOD, True).key == (
            "regress_x_to_y"
        )
        assert _message(inference_signature, servable, "classify_x_to_y", REGRESS_METHOD, True) == (
            "Expected regression signature method_name to be tensorflow/serving/regress. "
            "Was: tensorflow/serving/classify"
        )
        assert _message(inference_signature, servable, "", CLASSIFY_METHOD, False).startswith(
            "No classification inputs found in SignatureDef: "
        )


def test_classifications_pair_classes_and_scores() -> None:
    outputs = {
        "classes": np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object),
        "scores": np.array([[0.25, 0.75], [1.0, 0.0]], np.float32),
    }
    assert classifications(outputs, 2) == [
        [(b"a", 0.25), (b"b", 0.75)],
        [(b"c", 1.0), (b"d", 0.0)],
    ]
    assert classifications({"classes": outputs["classes"][:1]}, 1) == [[(b"a", 0.0), (b"b", 0.0)]]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (
            {"scores": np.zeros(2, np.float32)},
            "Expected Tensor shape: [batch_size num_classes] but got [2]",
        ),
        ({"scores": np.zeros((2, 1))}, "Expected scores Tensor of DT_FLOAT. Got: DT_DOUBLE"),
        (
            {"scores": np.full((2, 1), b"x", dtype=object)},
            "Expected scores Tensor of DT_FLOAT. Got: DT_STRING",
        ),
        (
            {"classes": np.zeros((2, 1), np.float32)},
            "Expected classes Tensor of DT_STRING. Got: DT_FLOAT",
        ),
        (
            {"scores": np.zeros((3, 1), np.float32)},
            "Expected scores output batch size of 2. Got: 3",
        ),
        (
            {
                "classes": np.zeros((2, 2), dtype=object),
                "scores": np.zeros((2, 3), np.float32),
            },
            "Tensors class and score should match in dim_size(1). Got 2 vs. 3",
        ),
    ],
)
def test_classification_output_checks(outputs, message) -> None:
    assert _message(classifications, outputs, 2) == message


def test_regressions_take_one_value_per_example() -> None:
    assert regressions(np.array([[1.5], [2.5]], np.float32), 2) == [1.5, 2.5]
    assert regressions(np.array([1.5], np.float32), 1) == [1.5]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            np.zeros((2, 2), np.float32),
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
            "[2,2]",
        ),
        (np.zeros(2), "Expected output Tensor of DT_FLOAT.  Got: DT_DOUBLE"),
        (np.zeros(3, np.float32), "Input batch size did not match output batch size: 2 vs. 3"),
    ],
)
def test_regression_output_checks(value, message) -> None:
    assert _message(regressions, value, 2) == message
