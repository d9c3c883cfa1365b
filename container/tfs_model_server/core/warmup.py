"""Model warmup: replay assets.extra/tf_serving_warmup_requests before a version serves.

As saved_model_warmup_util.cc does: the file is a TFRecord of PredictionLog protos, each
parsed and replayed num_request_iterations times as it is read; a record that does not parse,
a request that fails, more than 1000 records or a file that is no TFRecord fail the load.
Records with no log type are skipped; session_run and predict_streamed logs are UNIMPLEMENTED.
Warmup of a file that exists is recorded in model_warmup_latency and model_warmup_records_read.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError
from tensorflow_serving.apis import prediction_log_pb2

from tfs_model_server import tf_runtime
from tfs_model_server.core.dataplane import ModelRef
from tfs_model_server.core.example_inputs import serialized_examples
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD
from tfs_model_server.errors import Code, ServingError, invalid_argument, unimplemented

if TYPE_CHECKING:
    from tfs_model_server.core.dataplane import DataPlane
    from tfs_model_server.core.servable import Servable

log = logging.getLogger(__name__)

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000
SUPPORTED_LOG_TYPES = ("predict_log", "classify_log", "regress_log", "multi_inference_log")
TFRECORD_HINT = ". Please verify your warmup data is in TFRecord format."


class _ReadError(ServingError):
    """The warmup file could not be read: TF records this status in the warmup metrics."""

    def __init__(self, exc: tf_runtime.OpError) -> None:
        code = Code(exc.error_code)
        hint = TFRECORD_HINT if code is Code.DATA_LOSS else ""
        super().__init__(code, f"{exc.message}{hint}")
        self.status = f"{code.name}: {exc.message}"  # absl::Status::ToString()


def _records(path: Path) -> Iterator[bytes]:
    """The file's records; a read error keeps TF's code (DATA_LOSS gets TF Serving's hint)."""
    try:
        yield from tf_runtime.tf_record_iterator(str(path))
    except tf_runtime.OpError as exc:
        raise _ReadError(exc) from exc


def _parse(record: bytes, path: Path) -> prediction_log_pb2.PredictionLog:
    entry = prediction_log_pb2.PredictionLog()
    try:
        entry.ParseFromString(record)
    except DecodeError as exc:
        text = record.decode("utf-8", "replace")
        raise invalid_argument(f"Failed to parse warmup record: {text} from {path}") from exc
    return entry


def read_warmup_logs(version_dir: Path) -> list[prediction_log_pb2.PredictionLog]:
    """The PredictionLogs of a version's warmup file ([] when there is none)."""
    path = Path(version_dir) / WARMUP_FILE
    if not path.exists():
        return []
    logs = [_parse(record, path) for record in _records(path)]
    if len(logs) > MAX_WARMUP_RECORDS:
        raise _too_many(path)
    return logs


def _too_many(path: Path) -> ServingError:
    return invalid_argument(
        f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}"
    )


def replay(entry: prediction_log_pb2.PredictionLog, servable: Servable, plane: DataPlane) -> None:
    """Run one warmup record against the servable being loaded (RunWarmupRequest)."""
    kind = entry.WhichOneof("log_type")
    if kind is None:  # no log type: nothing to run
        return
    if kind not in SUPPORTED_LOG_TYPES:  # TF names the log_type_case(): the field's number
        number = entry.DESCRIPTOR.fields_by_name[kind].number
        raise unimplemented(f"Unsupported log_type for warmup: {number}")
    request = getattr(entry, kind).request
    if kind == "predict_log":
        inputs = {k: tf_runtime.make_ndarray(v) for k, v in request.inputs.items()}
        plane.predict_on(
            servable, request.model_spec.signature_name, inputs, list(request.output_filter)
        )
    elif kind == "multi_inference_log":
        tasks = [(ModelRef.from_spec(t.model_spec), t.method_name) for t in request.tasks]
        plane.multi_inference_on(
            servable, tasks, functools.partial(serialized_examples, request.input)
        )
    else:
        examples, context = serialized_examples(request.input)
        method = CLASSIFY_METHOD if kind == "classify_log" else REGRESS_METHOD
        plane.infer_on(servable, method, request.model_spec.signature_name, examples, context)


def _record(plane: DataPlane, export_dir: str, status: str, count: int, elapsed_us: int) -> None:
    plane.metrics.warmup_latency.observe(elapsed_us, export_dir, status)
    plane.metrics.warmup_records_read.inc(export_dir, status, amount=count)


def run_warmup(servable: Servable, plane: DataPlane, iterations: int = 1) -> int:
    """Replay every warmup record as it is read; returns how many were run. Errors fail the
    load; only a success or a read error is recorded in the warmup metrics, as in TF."""
    path = Path(servable.path) / WARMUP_FILE
    if not path.exists():
        log.info("No warmup data file found at %s", path)
        return 0
    start, count = time.perf_counter(), 0
    try:
        for record in _records(path):
            entry = _parse(record, path)
            for _ in range(max(1, iterations)):
                replay(entry, servable, plane)
            count += 1
            if count > MAX_WARMUP_RECORDS:
                raise _too_many(path)
    except _ReadError as exc:
        _record(plane, str(servable.path), exc.status, count, _micros_since(start))
        raise
    elapsed_us = _micros_since(start)
    _record(plane, str(servable.path), "OK", count, elapsed_us)
    log.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d. "
        "Elapsed time (microseconds): %d.",
        path,
        count,
        elapsed_us,
    )
    return count


def _micros_since(start: float) -> int:
    return int((time.perf_counter() - start) * 1e6)
