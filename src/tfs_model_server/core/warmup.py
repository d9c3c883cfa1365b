"""Model warmup: replay assets.extra/tf_serving_warmup_requests before a version serves.

The file is a TFRecord of PredictionLog protos (at most 1000); predict, classify, regress
and multi_inference logs are replayed num_request_iterations times; any failure fails the load.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tensorflow_serving.apis import prediction_log_pb2

from tfs_model_server.core import tf_runtime
from tfs_model_server.core.errors import ServingError, invalid_argument, unimplemented
from tfs_model_server.core.example_inputs import serialized_examples
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD

if TYPE_CHECKING:
    from tfs_model_server.core.dataplane import DataPlane
    from tfs_model_server.core.servable import Servable

log = logging.getLogger(__name__)

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000


def read_warmup_logs(version_dir: Path) -> list[prediction_log_pb2.PredictionLog]:
    """The PredictionLogs of a version's warmup file ([] when there is none)."""
    path = Path(version_dir) / WARMUP_FILE
    if not path.exists():
        return []
    logs = []
    try:
        for i, record in enumerate(tf_runtime.tf_record_iterator(str(path))):
            if i >= MAX_WARMUP_RECORDS:
                raise invalid_argument(
                    f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}"
                )
            entry = prediction_log_pb2.PredictionLog()
            entry.ParseFromString(record)
            logs.append(entry)
    except tf_runtime.OpError as exc:
        raise invalid_argument(f"Failed to read warmup file {path}: {exc.message}") from exc
    except Exception as exc:
        if isinstance(exc, ServingError):
            raise
        raise invalid_argument(f"Failed to parse warmup record in {path}: {exc}") from exc
    return logs


def replay(entry: prediction_log_pb2.PredictionLog, servable: Servable, plane: DataPlane) -> None:
    """Run one warmup record against the servable being loaded."""
    kind = entry.WhichOneof("log_type")
    if kind == "predict_log":
        request = entry.predict_log.request
        inputs = {k: tf_runtime.make_ndarray(v) for k, v in request.inputs.items()}
        plane.predict_on(
            servable, request.model_spec.signature_name, inputs, list(request.output_filter)
        )
    elif kind in ("classify_log", "regress_log"):
        request = getattr(entry, kind).request
        examples, context = serialized_examples(request.input)
        method = CLASSIFY_METHOD if kind == "classify_log" else REGRESS_METHOD
        plane.infer_on(servable, method, request.model_spec.signature_name, examples, context)
    elif kind == "multi_inference_log":
        request = entry.multi_inference_log.request
        examples, context = serialized_examples(request.input)
        for task in request.tasks:
            method = CLASSIFY_METHOD if task.method_name.endswith("classify") else REGRESS_METHOD
            plane.infer_on(servable, method, task.model_spec.signature_name, examples, context)
    else:
        raise unimplemented(f"Unsupported log_type for warmup: {kind}")


def run_warmup(servable: Servable, plane: DataPlane, iterations: int = 1) -> int:
    """Replay every warmup record; returns how many were read. Errors fail the load."""
    logs = read_warmup_logs(servable.path)
    if not logs:
        return 0
    start = time.perf_counter()
    for entry in logs:
        for _ in range(max(1, iterations)):
            replay(entry, servable, plane)
    log.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d. "
        "Elapsed time (microseconds): %d.",
        servable.path,
        len(logs),
        (time.perf_counter() - start) * 1e6,
    )
    return len(logs)
