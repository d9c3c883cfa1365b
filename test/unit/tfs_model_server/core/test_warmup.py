"""core.warmup: assets.extra/tf_serving_warmup_requests replayed against a version being
loaded (half_plus_two), and the records or files that fail the load."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import classification_pb2, prediction_log_pb2

import example_models as em
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.core.servable import Servable
from tfs_model_server.core.warmup import MAX_WARMUP_RECORDS, read_warmup_logs, run_warmup
from tfs_model_server.errors import Code, ServingError


@pytest.fixture
def version_dir(model_root: Path, tmp_path: Path) -> Path:
    """A copy of half_plus_two's version 123 whose warmup file the test writes."""
    return Path(shutil.copytree(model_root / "half_plus_two" / "123", tmp_path / "123"))


def _warm(version_dir: Path, plane: DataPlane, iterations: int = 1) -> int:
    with contextlib.closing(Servable("hp2", 123, version_dir)) as servable:
        return run_warmup(servable, plane, iterations)


def _classify_log(x: float) -> prediction_log_pb2.PredictionLog:
    feature = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[x]))
    request = classification_pb2.ClassificationRequest()
    request.model_spec.signature_name = "classify_x_to_y"
    request.input.example_list.examples.append(
        example_pb2.Example(features=feature_pb2.Features(feature={"x": feature}))
    )
    log = prediction_log_pb2.PredictionLog()
    log.classify_log.request.CopyFrom(request)
    return log


def test_no_warmup_file_means_no_records(version_dir: Path, plane: DataPlane) -> None:
    assert read_warmup_logs(version_dir) == []
    assert _warm(version_dir, plane) == 0


def test_records_are_replayed(version_dir: Path, plane: DataPlane) -> None:
    predict = em.predict_log("hp2", {"x": np.array([[1.0]], np.float32)})
    em.write_warmup_requests(version_dir, [predict, _classify_log(2.0)])
    assert _warm(version_dir, plane, iterations=3) == 2


@pytest.mark.parametrize(
    ("logs", "code", "message"),
    [
        (
            [em.predict_log("hp2", {"nope": np.array([[1.0]], np.float32)})],
            Code.INVALID_ARGUMENT,
            "Request inputs do not match required inputs for model `hp2`.",
        ),
        (
            [prediction_log_pb2.PredictionLog(session_run_log=prediction_log_pb2.SessionRunLog())],
            Code.UNIMPLEMENTED,
            "Unsupported log_type for warmup: 5",
        ),
        (
            [prediction_log_pb2.PredictionLog()] * (MAX_WARMUP_RECORDS + 1),
            Code.INVALID_ARGUMENT,
            "Number of warmup records exceeds the maximum (1000) at ",
        ),
    ],
)
def test_a_bad_record_fails_the_load(version_dir: Path, plane: DataPlane, logs, code, message):
    em.write_warmup_requests(version_dir, logs)
    with pytest.raises(ServingError) as info:
        _warm(version_dir, plane)
    assert info.value.code == code
    assert info.value.message.startswith(message)


def test_a_file_that_is_no_tfrecord_fails_the_load(version_dir: Path) -> None:
    path = em.write_warmup_requests(version_dir, [])
    path.write_bytes(b"not a TFRecord file at all")
    with pytest.raises(ServingError) as info:
        read_warmup_logs(version_dir)
    assert info.value.code == Code.DATA_LOSS  # the reader's own, with TF Serving's hint
    assert info.value.message.endswith(". Please verify your warmup data is in TFRecord format.")
