"""TensorFlow Serving config files: the model config and the batching parameters (text protos)."""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from sagemaker_serving.config.model_discovery import Model
from sagemaker_serving.config.settings import Settings

MODEL_PLATFORM = "tensorflow"


def model_config_text(models: Sequence[Model], one_line: bool = False) -> str:
    """A ModelServerConfig serving every listed version of each model (`--model_config_file`);
    `one_line` for a log line (one event in CloudWatch, not one per line of the file)."""
    return text_format.MessageToString(model_server_config(models), as_one_line=one_line)


def model_server_config(models: Sequence[Model]) -> model_server_config_pb2.ModelServerConfig:
    """The ModelServerConfig (model_config_list) of `models`, every listed version served."""
    config = model_server_config_pb2.ModelServerConfig()
    config_list = config.model_config_list
    config_list.SetInParent()
    for model in models:
        entry = config_list.config.add(
            name=model.name, base_path=str(model.base_path), model_platform=MODEL_PLATFORM
        )
        entry.model_version_policy.specific.versions.extend(model.versions)
    return config


# Batch Transform: a MultiRecord request holds as many records as fit in MaxPayloadInMB, far
# more than SAGEMAKER_TFS_MAX_BATCH_SIZE; such a task is split into batches of that size
# instead of being refused ("Task size N is larger than maximum input batch size").
BATCH_TRANSFORM_TASK_LIMIT = 10_000_000


def batching_parameters_text(settings: Settings) -> str:
    """BatchingParameters for `--batching_parameters_file`, one `name { value: N }` per line."""
    fields: tuple[tuple[str, object], ...] = (
        ("max_batch_size", settings.max_batch_size),
        ("batch_timeout_micros", settings.batch_timeout_micros),
        ("num_batch_threads", settings.num_batch_threads),
        ("max_enqueued_batches", settings.max_enqueued_batches),
    )
    if settings.batch:
        fields = (
            ("max_batch_size", max(settings.max_batch_size, BATCH_TRANSFORM_TASK_LIMIT)),
            *fields[1:],
            ("enable_large_batch_splitting", "true"),
            ("max_execution_batch_size", settings.max_batch_size),
        )
    return "".join(f"{name} {{ value: {value} }}\n" for name, value in fields)
