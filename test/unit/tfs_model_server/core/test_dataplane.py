"""core.dataplane: predict, classify, regress, multi-inference, metadata and status on real
SavedModels (half_plus_two: y = 0.5x + 2; half_plus_three: y = 0.5x + 3, versions 123 and 124)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.batching.scheduler import SharedBatchScheduler
from tfs_model_server.core.dataplane import DataPlane, ModelRef
from tfs_model_server.core.manager import State
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.metrics import ServingMetrics

HP2 = ModelRef("half_plus_two")
CLASSIFY = ModelRef("half_plus_two", signature_name="classify_x_to_y")


def example(x: float) -> bytes:
    feature = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[x]))
    features = feature_pb2.Features(feature={"x": feature})
    return example_pb2.Example(features=features).SerializeToString()


def _error(call, *args, **kwargs) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args, **kwargs)
    return info.value


def test_predict(plane: DataPlane) -> None:
    result = plane.predict(HP2, {"x": np.array([[1.0], [2.0]], np.float32)})
    assert (result.model_name, result.version, result.signature_name) == (
        "half_plus_two",
        123,
        "serving_default",
    )
    assert result.outputs["y"].tolist() == [[2.5], [3.0]]


@pytest.mark.parametrize(
    ("ref", "version"),
    [
        (ModelRef("half_plus_three"), 124),
        (ModelRef("half_plus_three", version=123), 123),
        (ModelRef("half_plus_three", label="stable"), 123),
        (ModelRef("half_plus_three", label="canary"), 124),
    ],
)
def test_predict_addresses_versions_and_labels(plane: DataPlane, ref: ModelRef, version) -> None:
    result = plane.predict(ref, {"x": np.array([[2.0]], np.float32)})
    assert (result.version, result.outputs["y"].tolist()) == (version, [[4.0]])


@pytest.mark.parametrize(
    ("ref", "inputs", "code", "message"),
    [
        (
            ModelRef("half_plus_three", version=123, label="stable"),
            {"x": np.zeros((1, 1), np.float32)},
            Code.INVALID_ARGUMENT,
            "Both version and version_label are set in the ModelSpec",
        ),
        (
            ModelRef("half_plus_two", signature_name="nope"),
            {"x": np.zeros((1, 1), np.float32)},
            Code.FAILED_PRECONDITION,
            'Serving signature key "nope" not found.',
        ),
        (
            HP2,
            {"z": np.zeros((1, 1), np.float32)},
            Code.INVALID_ARGUMENT,
            "Request inputs do not match required inputs for model `half_plus_two`. "
            "Send extra: {z}. Missing but required: {x}.",
        ),
    ],
)
def test_predict_errors(plane: DataPlane, ref: ModelRef, inputs, code, message) -> None:
    err = _error(plane.predict, ref, inputs)
    assert (err.code, err.message) == (code, message)


def test_predict_with_a_past_deadline_does_not_run(plane: DataPlane) -> None:
    err = _error(plane.predict, HP2, {"x": np.zeros((1, 1), np.float32)}, (), time.monotonic())
    assert (err.code, err.message) == (
        Code.DEADLINE_EXCEEDED,
        "Deadline exceeded before the model was run",
    )


def test_predict_through_the_batching_queues(plane: DataPlane) -> None:
    options = BatchingOptions(num_batch_threads=1, max_batch_size=8)
    with SharedBatchScheduler(options) as scheduler:
        metrics = ServingMetrics()
        batched = DataPlane(plane.manager, metrics, scheduler)
        result = batched.predict(HP2, {"x": np.array([[4.0], [6.0]], np.float32)})
        assert result.outputs["y"].tolist() == [[4.0], [5.0]]
        assert "model_server_batch_threads" in metrics.render().decode()


def given(examples: list[bytes], context: bytes | None = None):
    """An example source that answers `examples` and `context`."""
    return lambda: (examples, context)


def unreadable():
    raise AssertionError("the input was read before the checks")


def test_classify(plane: DataPlane) -> None:
    ref = ModelRef("half_plus_two", signature_name="classify_x_to_y")
    result = plane.infer(ref, CLASSIFY_METHOD, given([example(2.0), example(4.0)]), None)
    assert result.classifications == [[(b"", 3.0)], [(b"", 4.0)]]
    assert result.regressions is None


def test_regress_with_a_context(plane: DataPlane) -> None:
    ref = ModelRef("half_plus_two", signature_name="regress_x_to_y")
    result = plane.infer(ref, REGRESS_METHOD, given([example(2.0)], example(8.0)), None)
    assert result.regressions == [3.0]  # the example follows its context: its own x wins
    assert result.signature_name == "regress_x_to_y"


@pytest.mark.parametrize(
    ("signature", "method", "examples", "message"),
    [
        ("nope", CLASSIFY_METHOD, [example(1.0)], "No signature was found with the name: nope"),
        ("classify_x_to_y", CLASSIFY_METHOD, [], "Input is empty."),
        (
            "regress_x_to_y",
            CLASSIFY_METHOD,
            [example(1.0)],
            "Expected classification signature outputs to contain at least one of",
        ),
        ("classify_x_to_y", REGRESS_METHOD, [example(1.0)], "No regression outputs found in"),
        ("", REGRESS_METHOD, [example(1.0)], "No regression inputs found in SignatureDef"),
    ],
)
def test_infer_errors(plane: DataPlane, signature, method, examples, message) -> None:
    ref = ModelRef("half_plus_two", signature_name=signature)
    err = _error(plane.infer, ref, method, given(examples), None)
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message.startswith(message)


def test_method_name_check(plane: DataPlane) -> None:
    checked = DataPlane(plane.manager, ServingMetrics(), method_name_check=True)
    ref = ModelRef("half_plus_two", signature_name="regress_x_to_y")
    err = _error(checked.infer, ref, CLASSIFY_METHOD, given([example(1.0)]), None)
    assert err.message == (
        "Expected classification signature method_name to be tensorflow/serving/classify. "
        "Was: tensorflow/serving/regress"
    )


def test_multi_inference(plane: DataPlane) -> None:
    tasks = [
        (ModelRef("half_plus_two", signature_name="classify_x_to_y"), CLASSIFY_METHOD),
        (ModelRef("half_plus_two", signature_name="regress_x_to_y2"), REGRESS_METHOD),
    ]
    classified, regressed = plane.multi_inference(tasks, given([example(2.0)]))
    assert classified.classifications == [[(b"", 3.0)]]
    assert regressed.regressions == [4.0]  # y2 = 0.5x + 3


@pytest.mark.parametrize(
    ("tasks", "code", "message"),
    [
        ([], Code.INVALID_ARGUMENT, "ModelSpec has no name specified."),
        (
            [(CLASSIFY, CLASSIFY_METHOD), (ModelRef("half_plus_three"), REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
        ),
        (
            [(CLASSIFY, CLASSIFY_METHOD), (ModelRef(""), REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "Found ModelSpec with an empty model name.",
        ),
        (
            [(CLASSIFY, CLASSIFY_METHOD), (CLASSIFY, REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "Duplicate evaluation of signature: classify_x_to_y",
        ),
        (
            [(ModelRef("half_plus_two", signature_name="nope"), CLASSIFY_METHOD)],
            Code.INVALID_ARGUMENT,
            "Requested signature not found in model graph: nope",
        ),
        (
            [(HP2, "tensorflow/serving/predict")],
            Code.UNIMPLEMENTED,
            "Unsupported signature method_name: tensorflow/serving/predict",
        ),
    ],
)
def test_multi_inference_errors(plane: DataPlane, tasks, code, message) -> None:
    """multi_inference.cc's checks, every task before the input is read (an empty one)."""
    err = _error(plane.multi_inference, tasks, given([]))
    assert (err.code, err.message) == (code, message)


def test_multi_inference_runs_the_first_tasks_version(plane: DataPlane) -> None:
    """Only the first task's ModelSpec picks the version (RunMultiInferenceWithServerCore)."""
    tasks = [
        (ModelRef("half_plus_two", signature_name="classify_x_to_y"), CLASSIFY_METHOD),
        (ModelRef("half_plus_two", version=999, signature_name="regress_x_to_y"), REGRESS_METHOD),
    ]
    results = plane.multi_inference(tasks, given([example(2.0)]))
    assert [r.regressions for r in results] == [None, [3.0]]
    assert len({r.version for r in results}) == 1


def test_infer_checks_the_model_and_signature_before_the_input(plane: DataPlane) -> None:
    """As TF Serving's classifier and regressor: a bad input is reported last."""
    for ref, message in (
        (ModelRef("nope"), "Servable not found for request: Latest(nope)"),
        (
            ModelRef("half_plus_two", signature_name="nope"),
            "No signature was found with the name: nope",
        ),
        (ModelRef("half_plus_two"), "No regression inputs found in SignatureDef"),
    ):
        err = _error(plane.infer, ref, REGRESS_METHOD, unreadable, None)
        assert err.message.startswith(message)


def test_metadata(plane: DataPlane) -> None:
    response = plane.metadata(ModelRef("half_plus_three", label="stable"))
    assert (response.model_spec.name, response.model_spec.version.value) == (
        "half_plus_three",
        123,
    )
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signatures)
    assert "classify_x_to_y" in signatures.signature_def


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((), "GetModelMetadataRequest must specify at least one metadata_field"),
        (("signature_def", "other"), "Metadata field other is not supported"),
    ],
)
def test_metadata_errors(plane: DataPlane, fields, message) -> None:
    assert _error(plane.metadata, HP2, fields).message == message


def test_status(plane: DataPlane) -> None:
    response = plane.status(ModelRef("half_plus_three"))
    assert [(s.version, s.state) for s in response.model_version_status] == [
        (124, State.AVAILABLE),
        (123, State.AVAILABLE),
    ]
    assert _error(plane.status, ModelRef("")).message == "Could not find any versions of model "
