"""core.servable: a SavedModel version in its own Session (half_plus_two: y = 0.5x + 2), the
predict plan's checks and TensorFlow errors as ServingErrors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfs_model_server.core.servable import (
    CLASSIFY_METHOD,
    PREDICT_METHOD,
    Servable,
    as_serving_error,
    default_inputs,
    predict_plan,
)
from tfs_model_server.errors import Code, ServingError


@pytest.fixture(scope="module")
def servable(model_root: Path):
    loaded = Servable("hp2", 123, model_root / "half_plus_two" / "123")
    yield loaded
    loaded.close()


def _message(call, *args) -> str:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value.message


def test_signatures(servable: Servable) -> None:
    default = servable.signature("")
    assert (default.key, default.method_name) == ("serving_default", PREDICT_METHOD)
    assert default.inputs["x"].shape == (None, 1) and default.inputs["x"].tensor_name == "x:0"
    assert servable.signatures["classify_x_to_y"].method_name == CLASSIFY_METHOD
    with pytest.raises(ServingError) as info:
        servable.signature("nope")
    assert (info.value.code, info.value.message) == (
        Code.FAILED_PRECONDITION,
        'Serving signature key "nope" not found.',
    )


def test_run_feeds_the_runtime_directly(servable: Servable) -> None:
    signature = servable.signature("serving_default")
    # shape [3] into a [None, 1] input: Session.run refuses it, the C++ runtime takes it
    out = servable.run(signature, {"x": np.array([1.0, 2.0, 3.0], np.float32)}, ["y"])
    assert out["y"].ravel().tolist() == [2.5, 3.0, 3.5]


def test_runtime_errors_keep_their_code(servable: Servable) -> None:
    with pytest.raises(ServingError) as info:
        servable.run_tensors({"x:0": np.array([["a"]], dtype=object)}, ["y:0"])
    assert info.value.code == Code.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (tf.errors.NotFoundError(None, None, "gone"), Code.NOT_FOUND),
        (ValueError("bad"), Code.INVALID_ARGUMENT),
        (RuntimeError("ours"), Code.INTERNAL),
    ],
)
def test_as_serving_error(exc: BaseException, code: Code) -> None:
    assert as_serving_error(exc).code == code


def test_predict_plan(servable: Servable) -> None:
    signature = servable.signature("serving_default")
    assert predict_plan("hp2", signature, ["x"], []) == ["y"]
    assert predict_plan("hp2", signature, ["x"], ["y"]) == ["y"]
    assert _message(predict_plan, "hp2", signature, ["x", "z"], []) == (
        "input size does not match signature: 2!=1 len({x,z}) != len({x}). "
        "Sent extra: {z}. Missing but required: {}."
    )
    assert _message(predict_plan, "hp2", signature, ["x"], ["q"]) == (
        "output tensor alias not found in signature: q Outputs expected to be in the set {y}."
    )
    assert _message(predict_plan, "hp2", signature, ["x"], ["y", "y"]) == (
        "duplicate output tensor alias: y"
    )


def test_default_inputs_without_defaults_are_the_given_ones(servable: Servable) -> None:
    given = {"x": np.zeros((1, 1), np.float32)}
    assert default_inputs(servable.signature(""), given) == given
