"""TF Serving's own tests of model warmup, batching parameters and the Prometheus page, ported.

Ported (TEST names kept in the test names and ids), against TF Serving's half_plus_two
(test/support/tfs_testdata/saved_model_half_plus_two_cpu, copied into tmp_path):

- servables/tensorflow/saved_model_warmup_test.cc: MixedWarmupData (with and without
  num_request_iterations), UnsupportedLogType_SessionRun, UnsupportedLogType_PredictStreamed.
- servables/tensorflow/saved_model_warmup_util_test.cc: NoWarmupDataFile, WarmupDataFileEmpty,
  UnsupportedFileFormat, TooManyWarmupRecords, UnparsableRecord, RunSuccess, RunFailure; with
  what saved_model_warmup_util.cc records in model_warmup_latency / model_warmup_records_read.
- servables/tensorflow/bundle_factory_util_test.cc: WrapSessionForBatchingConfigError (and the
  other checks WrapSessionForBatching / SharedBatchScheduler::AddQueue make of
  BatchingParameters), GetPerModelBatchingParams, WrapSessionForBatching (10 concurrent
  requests, max_batch_size 2: every caller gets its own half_plus_two answer).
- util/prometheus_exporter_test.cc: Counter, Histogram, SanitizeLabelValue,
  SanitizeLabelName, SanitizeMetricName.

Not ported, having no observable counterpart here:
- RunSavedModelWarmupTest.WarmupStateRegistration: TF's WarmupStateRegistry and
  num_model_warmup_threads; tensorflow_model_server sets neither (its SessionBundleConfig gets
  only num_request_iterations, from --num_request_iterations_for_warmup) and the records read
  and the errors are the same with one thread.
- GetSessionOptions, GetRunOptions, WrapSession, WrapSessionIgnoreThreadPoolOptions: C++
  Session wrappers and option copies (session options are core/session_options.py's).
- EstimateResourceFromPathWithBadExport / WithGoodExport: the resource estimate only feeds
  TF Serving's resource tracker, which never refuses a load in tensorflow_model_server.
- PrometheusExporterTest.Gauge: the model server exports no gauge.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import inference_pb2, input_pb2, prediction_log_pb2

import example_models as em
from tfs_model_server.batching.scheduler import SharedBatchScheduler
from tfs_model_server.core import config_protos
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD, Servable
from tfs_model_server.core.warmup import MAX_WARMUP_RECORDS, WARMUP_FILE, run_warmup
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.metrics import Counter, Histogram, ServingMetrics
from tfs_model_server.server import model_batching, options_from
from tfs_testdata_dir import TESTDATA

HALF_PLUS_TWO = TESTDATA / "saved_model_half_plus_two_cpu" / "00000123"


# ----- saved_model_warmup_test.cc / saved_model_warmup_util_test.cc -------------------------
@pytest.fixture
def version_dir(tmp_path: Path) -> Path:
    """A copy of TF Serving's half_plus_two version 123, for the test to add a warmup file."""
    return Path(shutil.copytree(HALF_PLUS_TWO, tmp_path / "00000123"))


@pytest.fixture
def warm_plane(plane: DataPlane) -> DataPlane:
    """A data plane with metrics of its own, counting the calls warmup makes of it."""
    own = DataPlane(plane.manager, ServingMetrics())
    own.calls = Tally()  # type: ignore[attr-defined]
    for name in ("predict_on", "infer_on"):
        original = getattr(own, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            method = args[1] if _name == "infer_on" else "predict"
            own.calls[method] += 1  # type: ignore[attr-defined]
            return _original(*args, **kwargs)

        setattr(own, name, counted)
    return own


def _examples(x: float) -> input_pb2.Input:
    feature = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[x]))
    example = example_pb2.Example(features=feature_pb2.Features(feature={"x": feature}))
    return input_pb2.Input(example_list=input_pb2.ExampleList(examples=[example]))


def _log(kind: str) -> prediction_log_pb2.PredictionLog:
    """PopulatePredictionLog(log_type) for half_plus_two's signatures."""
    entry = prediction_log_pb2.PredictionLog()
    if kind == "predict_log":
        return em.predict_log("test_model", {"x": np.array([[1.0]], np.float32)})
    request = getattr(entry, kind).request
    if kind == "classify_log":
        request.model_spec.signature_name = "classify_x_to_y"
        request.input.CopyFrom(_examples(1.0))
    elif kind == "regress_log":
        request.model_spec.signature_name = "regress_x_to_y"
        request.input.CopyFrom(_examples(1.0))
    elif kind == "multi_inference_log":  # PopulateMultiInferenceRequest: regress, classify
        request.input.CopyFrom(_examples(1.0))
        for signature, method in (
            ("regress_x_to_y", REGRESS_METHOD),
            ("classify_x_to_y", CLASSIFY_METHOD),
        ):
            task = request.tasks.add(method_name=method)
            task.model_spec.name, task.model_spec.signature_name = "test_model", signature
    elif kind == "predict_streamed_log":
        entry.predict_streamed_log.request.add().CopyFrom(_log("predict_log").predict_log.request)
    else:
        entry.session_run_log.SetInParent()
    return entry


MIXED = ["regress_log", "classify_log", "predict_log", "multi_inference_log"]


def _write(version_dir: Path, records: list[bytes], times: int) -> Path:
    """WriteWarmupData: `times` rounds of `records`, as a TFRecord file."""
    path = version_dir / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(times):
            for record in records:
                writer.write(record)
    return path


def _mixed(*kinds: str) -> list[bytes]:
    """AddMixedWarmupData: one serialized record per log type."""
    return [_log(kind).SerializeToString() for kind in kinds or MIXED]


def _warm(version_dir: Path, plane: DataPlane, iterations: int = 0) -> int:
    with contextlib.closing(Servable("half_plus_two", 123, version_dir)) as servable:
        return run_warmup(servable, plane, iterations)


def _warmup_metrics(plane: DataPlane, version_dir: Path) -> dict[str, tuple[int, int]]:
    """status -> (model_warmup_latency samples, model_warmup_records_read) for version_dir."""
    metrics, path = plane.metrics, str(version_dir)
    statuses = {k[1] for k in metrics.warmup_records_read._values if k[0] == path}
    return {
        s: (metrics.warmup_latency.count(path, s), metrics.warmup_records_read.value(path, s))
        for s in statuses
    }


def _failure(version_dir: Path, plane: DataPlane) -> ServingError:
    with pytest.raises(ServingError) as info:
        _warm(version_dir, plane)
    return info.value


@pytest.mark.parametrize(
    "iterations", [0, 2], ids=["default_iterations", "num_request_iterations=2"]
)
def test_SavedModelBundleWarmupOptionsTest_MixedWarmupData(version_dir, warm_plane, iterations):
    _write(version_dir, _mixed(), 10)
    assert _warm(version_dir, warm_plane, iterations) == 40
    runs = max(1, iterations)
    # predict: 10 records; regress and classify: 10 records each plus one task each of the
    # 10 multi_inference records
    assert warm_plane.calls == {
        "predict": 10 * runs,
        REGRESS_METHOD: 20 * runs,
        CLASSIFY_METHOD: 20 * runs,
    }
    assert _warmup_metrics(warm_plane, version_dir) == {"OK": (1, 40)}


@pytest.mark.parametrize(
    ("kind", "number"),
    [
        pytest.param("session_run_log", 5, id="UnsupportedLogType_SessionRun"),
        pytest.param("predict_streamed_log", 7, id="UnsupportedLogType_PredictStreamed"),
    ],
)
def test_SavedModelBundleWarmupTest_UnsupportedLogType(version_dir, warm_plane, kind, number):
    _write(version_dir, _mixed(kind), 10)
    error = _failure(version_dir, warm_plane)
    # TF streams log_type_case(): the oneof field's number
    assert (error.code, error.message) == (
        Code.UNIMPLEMENTED,
        f"Unsupported log_type for warmup: {number}",
    )
    assert _warmup_metrics(warm_plane, version_dir) == {}  # returned before recording


def test_a_record_without_log_type_is_skipped(version_dir, warm_plane):
    """RunWarmupRequest's default case: LOG_TYPE_NOT_SET runs nothing and is OK."""
    _write(version_dir, [prediction_log_pb2.PredictionLog().SerializeToString()], 3)
    assert _warm(version_dir, warm_plane) == 3 and not warm_plane.calls


def test_RunSavedModelWarmupUntrackedTest_NoWarmupDataFile(version_dir, warm_plane):
    (version_dir / WARMUP_FILE).parent.mkdir(exist_ok=True)
    assert _warm(version_dir, warm_plane) == 0
    assert _warmup_metrics(warm_plane, version_dir) == {}  # no file: nothing recorded


def test_RunSavedModelWarmupUntrackedTest_WarmupDataFileEmpty(version_dir, warm_plane):
    _write(version_dir, [], 0)
    assert _warm(version_dir, warm_plane) == 0 and not warm_plane.calls
    assert _warmup_metrics(warm_plane, version_dir) == {"OK": (1, 0)}


def test_RunSavedModelWarmupUntrackedTest_UnsupportedFileFormat(version_dir, warm_plane):
    path = version_dir / WARMUP_FILE  # WriteWarmupDataAsSerializedProtos: no TFRecord framing
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(_log("session_run_log").SerializeToString() * 10)
    error = _failure(version_dir, warm_plane)
    assert error.code == Code.DATA_LOSS
    assert error.message.endswith(". Please verify your warmup data is in TFRecord format.")
    ((status, recorded),) = _warmup_metrics(warm_plane, version_dir).items()
    assert status.startswith("DATA_LOSS: ") and recorded == (1, 0)


def test_RunSavedModelWarmupUntrackedTest_TooManyWarmupRecords(version_dir, warm_plane):
    path = _write(version_dir, _mixed("predict_log"), MAX_WARMUP_RECORDS + 1)
    error = _failure(version_dir, warm_plane)
    assert (error.code, error.message) == (
        Code.INVALID_ARGUMENT,
        f"Number of warmup records exceeds the maximum (1000) at {path}",
    )
    assert warm_plane.calls == {"predict": 1001}  # checked after each record has run
    assert _warmup_metrics(warm_plane, version_dir) == {}


def test_RunSavedModelWarmupUntrackedTest_UnparsableRecord(version_dir, warm_plane):
    path = _write(version_dir, [b"malformed_record"], 10)
    error = _failure(version_dir, warm_plane)
    assert (error.code, error.message) == (
        Code.INVALID_ARGUMENT,
        f"Failed to parse warmup record: malformed_record from {path}",
    )


def test_unparsable_record_after_good_ones_fails_after_they_ran(version_dir, warm_plane):
    """Records are replayed as they are read: those before the bad one have run."""
    _write(version_dir, [*_mixed("predict_log") * 2, b"malformed_record"], 1)
    assert _failure(version_dir, warm_plane).message.startswith("Failed to parse warmup record")
    assert warm_plane.calls == {"predict": 2}


def test_RunSavedModelWarmupUntrackedTest_RunSuccess(version_dir, warm_plane):
    _write(version_dir, _mixed(), 5)
    assert _warm(version_dir, warm_plane) == 20


def test_RunSavedModelWarmupUntrackedTest_RunFailure(version_dir, warm_plane):
    bad = em.predict_log("test_model", {"nope": np.array([[1.0]], np.float32)})
    _write(version_dir, [bad.SerializeToString(), *_mixed()], 10)
    error = _failure(version_dir, warm_plane)
    assert error.code == Code.INVALID_ARGUMENT
    assert "Request inputs do not match required inputs" in error.message
    assert warm_plane.calls == {"predict": 1}  # the first failure ends the warmup
    assert _warmup_metrics(warm_plane, version_dir) == {}


def _multi(*tasks: tuple[str, str, str]) -> prediction_log_pb2.PredictionLog:
    entry = prediction_log_pb2.PredictionLog()
    request = entry.multi_inference_log.request
    request.input.CopyFrom(_examples(1.0))
    for name, signature, method in tasks:
        task = inference_pb2.InferenceTask(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = name, signature
        request.tasks.append(task)
    return entry


@pytest.mark.parametrize(
    ("tasks", "code", "message"),
    [
        (
            [("", "regress_x_to_y", REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "Found ModelSpec with an empty model name.",
        ),
        (
            [("a", "regress_x_to_y", REGRESS_METHOD), ("b", "classify_x_to_y", CLASSIFY_METHOD)],
            Code.INVALID_ARGUMENT,
            "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
        ),
        (
            [("a", "regress_x_to_y", REGRESS_METHOD), ("a", "regress_x_to_y", REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "Duplicate evaluation of signature: regress_x_to_y",
        ),
        (
            [("a", "nope", REGRESS_METHOD)],
            Code.INVALID_ARGUMENT,
            "Requested signature not found in model graph: nope",
        ),
        (
            [("a", "regress_x_to_y", "my/regress")],
            Code.UNIMPLEMENTED,
            "Unsupported signature method_name: my/regress",
        ),
    ],
    ids=["empty_name", "two_names", "duplicate", "no_signature", "unknown_method"],
)
def test_multi_inference_warmup_checks_like_RunMultiInference(
    version_dir, warm_plane, tasks, code, message
):
    """saved_model_warmup.cc runs multi_inference_log through RunMultiInference, whose task
    checks (multi_inference.cc) fail the load before any task runs."""
    _write(version_dir, [_multi(*tasks).SerializeToString()], 1)
    error = _failure(version_dir, warm_plane)
    assert (error.code, error.message) == (code, message)
    assert not warm_plane.calls


# ----- bundle_factory_util_test.cc / bundle_factory_util.cc ---------------------------------
def _Params(text: str) -> Any:
    """A BatchingParameters message from its text format."""
    return text_format.Parse(text, config_protos.BatchingParameters())


QUEUE_AND_THREADS = (
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
    "num_batch_threads",
    "thread_pool_name",
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "max_batch_size { value: 2 } allowed_batch_sizes: 1 allowed_batch_sizes: 3",
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 3; "
            "expected 2",
            id="WrapSessionForBatchingConfigError",
        ),
        pytest.param(
            "allowed_batch_sizes: 8 allowed_batch_sizes: 16",
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; "
            "expected 1000",
            id="WrapSessionForBatching_default_max_batch_size",
        ),
        pytest.param(
            "num_batch_threads { value: 0 }",
            "num_batch_threads must be positive; was 0",
            id="CreateBatchScheduler_num_batch_threads",
        ),
        pytest.param(
            "max_batch_size { value: 0 }",
            "input_batch_size_limit must be positive; was 0",
            id="AddQueue_input_batch_size_limit",
        ),
        pytest.param(
            "batch_timeout_micros { value: -1 }",
            "batch_timeout_micros must be non-negative; was -1",
            id="AddQueue_batch_timeout_micros",
        ),
        pytest.param(
            "max_enqueued_batches { value: 0 } enable_large_batch_splitting { value: true }",
            "max_enqueued_batches must be positive; was 0",
            id="AddQueue_max_enqueued_batches",
        ),
        pytest.param(
            "max_batch_size { value: 4 } enable_large_batch_splitting { value: true } "
            "max_execution_batch_size { value: 8 }",
            "When enable_large_batch_splitting is true, input_batch_size_limit must be "
            "greater than or equal to max_execution_batch_size.148",
            id="AddQueue_large_batch_splitting",
        ),
    ],
)
def test_BundleFactoryUtilTest_batching_parameters_refused(text, message):
    with pytest.raises(ServingError) as info:
        options_from(_Params(text), QUEUE_AND_THREADS)
    assert (info.value.code, info.value.message) == (Code.INVALID_ARGUMENT, message)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "max_batch_size { value: 8 } allowed_batch_sizes: 4 allowed_batch_sizes: 2 "
            "allowed_batch_sizes: 8",
            id="WrapSessionForBatching_unordered_allowed_batch_sizes",
        ),
        pytest.param("max_enqueued_batches { value: 0 }", id="AddQueue_max_enqueued_batches_0"),
        pytest.param(
            "max_batch_size { value: 8 } enable_large_batch_splitting { value: true } "
            "max_execution_batch_size { value: 4 } allowed_batch_sizes: 2 allowed_batch_sizes: 8",
            id="WrapSessionForBatching_splitting_last_entry_is_max_batch_size",
        ),
    ],
)
def test_BundleFactoryUtilTest_batching_parameters_accepted(text):
    """What the server's path (WrapSessionForBatching, AddQueue) lets through: it never checks
    that allowed_batch_sizes increase (only CreateBasicBatchingSession does, unused there)."""
    options_from(_Params(text), QUEUE_AND_THREADS)


def test_BundleFactoryUtilTest_GetPerModelBatchingParams(tmp_path):
    shared = options_from(
        _Params("allowed_batch_sizes: 8 allowed_batch_sizes: 16 max_batch_size { value: 16 }"),
        QUEUE_AND_THREADS,
    )
    assert model_batching(tmp_path / "does" / "not" / "exists", shared) is None
    (tmp_path / "batching_params.pbtxt").write_text(
        "allowed_batch_sizes: 8\nallowed_batch_sizes: 16\nallowed_batch_sizes: 128\n"
        "max_batch_size { value: 128 }\n"
    )
    own = model_batching(tmp_path, shared)
    assert own is not None
    assert (own.allowed_batch_sizes, own.max_batch_size) == ((8, 16, 128), 128)


def test_BundleFactoryUtilTest_WrapSessionForBatching(plane, version_dir):
    """max_batch_size 2, max_enqueued_batches INT_MAX: 10 concurrent one-row predictions on
    half_plus_two each get their own answer, in batches of at most 2 (TestMultipleRequests)."""
    options = options_from(
        _Params(
            "max_batch_size { value: 2 } max_enqueued_batches { value: 2147483647 } "
            "batch_timeout_micros { value: 100000 } num_batch_threads { value: 1 }"
        ),
        QUEUE_AND_THREADS,
    )
    scheduler = SharedBatchScheduler(options)
    batched = DataPlane(plane.manager, ServingMetrics(), scheduler)
    servable = Servable("half_plus_two", 123, version_dir)
    answers: dict[int, list[float]] = {}

    def call(i: int) -> None:
        result = batched.predict_on(servable, "", {"x": np.array([float(i)], np.float32)})
        answers[i] = result.outputs["y"].tolist()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(10)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        scheduler.close()
        servable.close()
    assert answers == {i: [i / 2 + 2] for i in range(10)}
    # batch sizes: rows per bucket [<1, [1, 2), [2, 4), ...], then their sum and count
    row = batched.metrics.batch_size._values[("model_server_batch_threads",)]
    assert row[-2] == 10 and row[-1] >= 5 and sum(row[3:-2]) == 0  # no batch above 2 rows


# ----- prometheus_exporter_test.cc -----------------------------------------------------------
def _page(*metrics: Counter | Histogram) -> str:
    lines: list[str] = []
    for metric in metrics:
        lines += metric.render()
    return "\n".join(lines) + "\n"


def _counter(name: str, label: str, value: str) -> Counter:
    counter = Counter(name, [label])
    counter.inc(value, amount=2)
    return counter


@pytest.mark.parametrize(
    ("name", "label", "value", "expected"),
    [
        pytest.param("/test/path/total", "name", "abc",
                     ["# TYPE :test:path:total counter", ':test:path:total{name="abc"} 2'],
                     id="Counter"),
        pytest.param("/test/path/total", "name", '"abc\\"',
                     ["# TYPE :test:path:total counter",
                      ':test:path:total{name="\\"abc\\\\\\""} 2'],
                     id="SanitizeLabelValue"),
        pytest.param("/test/path/total", "my-name+1", "abc",
                     ["# TYPE :test:path:total counter", ':test:path:total{my_name_1="abc"} 2'],
                     id="SanitizeLabelName"),
        pytest.param("0/path-total_count", "name", "abc",
                     ["# TYPE _0:path:total_count counter", '_0:path:total_count{name="abc"} 2'],
                     id="SanitizeMetricName"),
    ],
)  # fmt: skip
def test_PrometheusExporterTest_scalar(
    name: str, label: str, value: str, expected: list[str]
) -> None:
    assert "\n".join(expected) + "\n" in _page(_counter(name, label, value))


def test_PrometheusExporterTest_Histogram() -> None:
    histogram = Histogram("/test/path/histogram", ["status"], [2.0**i for i in range(10)])
    for value in (2, 20, 200):
        histogram.observe(value, "good")
    limits = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "+Inf"]
    counts = [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # a bucket's limit is exclusive
    expected = [
        "# TYPE :test:path:histogram histogram",
        *(
            f':test:path:histogram_bucket{{status="good",le="{le}"}} {n}'
            for le, n in zip(limits, counts, strict=True)
        ),
        ':test:path:histogram_sum{status="good"} 222',
        ':test:path:histogram_count{status="good"} 3',
    ]
    assert "\n".join(expected) + "\n" in _page(histogram)


@pytest.mark.parametrize(
    ("observed", "expected_sum"),
    [(1234567, "1.23457e+06"), (0.5, "0.5"), (2500000, "2.5e+06")],
)
def test_PrometheusExporterTest_histogram_sum_is_StrCat_of_a_double(observed, expected_sum):
    histogram = Histogram("/test/path/histogram", ["status"], [1.0])
    histogram.observe(observed, "good")
    assert f':test:path:histogram_sum{{status="good"}} {expected_sum}' in _page(histogram)


def test_PrometheusExporterTest_metrics_in_name_order() -> None:
    """GeneratePage walks the CollectionRegistry's descriptor map: metrics by name."""
    text = ServingMetrics().render().decode()
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert types == sorted(types) and ":tensorflow:serving:model_warmup_records_read" in types
