"""TF Serving warmup records: a TFRecord of PredictionLog protos in assets.extra/."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._paths import PathLike

if TYPE_CHECKING:
    from tensorflow_serving.apis import prediction_log_pb2

WARMUP_DIR = "assets.extra"
WARMUP_FILENAME = "tf_serving_warmup_requests"


def predict_log(
    model_name: str,
    inputs: Mapping[str, np.ndarray],
    signature_name: str = "serving_default",
) -> prediction_log_pb2.PredictionLog:
    """A PredictionLog holding a PredictRequest for `model_name` with `inputs` by alias."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )


def write_warmup_requests(
    version_dir: PathLike, logs: Iterable[prediction_log_pb2.PredictionLog]
) -> Path:
    """Write `logs` as `version_dir/assets.extra/tf_serving_warmup_requests`; return its path."""
    import tensorflow as tf

    path = Path(version_dir) / WARMUP_DIR / WARMUP_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path
