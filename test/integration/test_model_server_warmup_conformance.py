"""TF Serving's warmup tests (servables/tensorflow/saved_model_warmup_test.cc,
saved_model_warmup_util_test.cc) as seen from outside a running tfs-model-server: the
warmup metrics saved_model_warmup_util.cc records on the Prometheus page and a warmup file
that fails the load.

The cases themselves are ported at unit level in
test/unit/tfs_model_server/test_warmup_batching_metrics_conformance.py; here only what needs
the whole server: that warmup is recorded in the metrics the page exports, and that a bad
file ends start-up with TF Serving's error text. Not ported here: everything else (the unit
tests cover it without a server per case).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests
import tensorflow as tf
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import prediction_log_pb2

from conftest import model_server, start_model_server
from tfs_testdata_dir import TESTDATA

HALF_PLUS_TWO = TESTDATA / "saved_model_half_plus_two_cpu"
WARMUP = Path("00000123") / "assets.extra" / "tf_serving_warmup_requests"


def _model(tmp_path: Path) -> Path:
    return Path(shutil.copytree(HALF_PLUS_TWO, tmp_path / "half_plus_two"))


def _mixed_records() -> list[bytes]:
    """AddMixedWarmupData for half_plus_two: regress, classify, predict, multi_inference."""
    feature = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[1.0]))
    example = example_pb2.Example(features=feature_pb2.Features(feature={"x": feature}))
    regress, classify, predict, multi = (prediction_log_pb2.PredictionLog() for _ in range(4))
    regress.regress_log.request.model_spec.signature_name = "regress_x_to_y"
    regress.regress_log.request.input.example_list.examples.append(example)
    classify.classify_log.request.model_spec.signature_name = "classify_x_to_y"
    classify.classify_log.request.input.example_list.examples.append(example)
    predict.predict_log.request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]], tf.float32))
    request = multi.multi_inference_log.request
    request.input.example_list.examples.append(example)
    for signature, method in (("regress_x_to_y", "regress"), ("classify_x_to_y", "classify")):
        task = request.tasks.add(method_name=f"tensorflow/serving/{method}")
        task.model_spec.name, task.model_spec.signature_name = "test_model", signature
    return [log.SerializeToString() for log in (regress, classify, predict, multi)]


def _write(path: Path, records: list[bytes], times: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(times):
            for record in records:
                writer.write(record)


@pytest.mark.parametrize("iterations", [2], ids=["MixedWarmupData_num_request_iterations=2"])
def test_SavedModelBundleWarmupOptionsTest_MixedWarmupData_metrics(tmp_path, iterations):
    base = _model(tmp_path)
    _write(base / WARMUP, _mixed_records(), 10)
    with model_server(
        [
            f"--model_base_path={base}",
            "--model_name=hp",
            f"--num_request_iterations_for_warmup={iterations}",
            f"--monitoring_config_file={TESTDATA / 'monitoring_config.txt'}",
        ],
        tmp_path / "log",
        "hp",
    ) as server:
        page = requests.get(f"{server.rest}/monitoring/prometheus/metrics", timeout=10).text
        log = server.log()
    version = base / "00000123"
    labels = f'model_path="{version}",status="OK"'
    assert f":tensorflow:serving:model_warmup_records_read{{{labels}}} 40\n" in page
    assert f":tensorflow:serving:model_warmup_latency_count{{{labels}}} 1\n" in page
    assert f"Finished reading warmup data for model at {base / WARMUP}" in log
    assert "Number of warmup records read: 40." in log


def test_RunSavedModelWarmupUntrackedTest_UnsupportedFileFormat_fails_start_up(tmp_path):
    base = _model(tmp_path)
    (base / WARMUP).parent.mkdir()
    (base / WARMUP).write_bytes(_mixed_records()[2] * 10)  # protos without TFRecord framing
    server = start_model_server(
        [f"--model_base_path={base}", "--model_name=hp", "--max_num_load_retries=0"],
        tmp_path / "log",
        timeout=60,
    )
    try:
        assert server.proc.wait(60) != 0
    finally:
        server.stop()
    log = server.log()
    assert "Failed to start server" in log
    assert "Please verify your warmup data is in TFRecord format" in log
