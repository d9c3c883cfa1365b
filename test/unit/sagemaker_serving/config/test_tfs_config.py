"""sagemaker_serving.config.tfs_config: model config and batching parameters text protos."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from sagemaker_serving.config.model_discovery import Model
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.config.tfs_config import batching_parameters_text, model_config_text
from tfs_model_server.core.config_protos import BatchingParameters


def parse_config(text: str) -> model_server_config_pb2.ModelServerConfig:
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(text, config)
    return config


def test_model_config_round_trip():
    models = [
        Model("alpha", Path("/opt/ml/model/alpha"), (0, 123)),
        Model("beta", Path("/opt/ml/model/beta"), (7,)),
    ]
    config = parse_config(model_config_text(models))
    assert config.WhichOneof("config") == "model_config_list"
    entries = config.model_config_list.config
    assert [(c.name, c.base_path, c.model_platform) for c in entries] == [
        ("alpha", "/opt/ml/model/alpha", "tensorflow"),
        ("beta", "/opt/ml/model/beta", "tensorflow"),
    ]
    assert [list(c.model_version_policy.specific.versions) for c in entries] == [[0, 123], [7]]
    assert all(c.model_version_policy.WhichOneof("policy_choice") == "specific" for c in entries)


def test_model_config_escapes_awkward_base_paths():
    awkward = Path('/tmp/it\'s a "quoted" dir\\with back\\slash/caf\u00e9\tand tab')
    text = model_config_text([Model("m", awkward, (1,))])
    (entry,) = parse_config(text).model_config_list.config
    assert entry.base_path == str(awkward)
    assert entry.name == "m"


def test_model_config_on_one_line_for_the_log_is_the_same_config():
    models = [Model("a", Path("/opt/ml/model/a b"), (1, 2)), Model("b", Path("/m/b"), (3,))]
    line = model_config_text(models, one_line=True)
    assert "\n" not in line.strip()
    assert parse_config(line) == parse_config(model_config_text(models))


def test_model_config_lists_every_version():
    versions = tuple(range(50))
    (entry,) = parse_config(
        model_config_text([Model("m", Path("/m"), versions)])
    ).model_config_list.config
    assert tuple(entry.model_version_policy.specific.versions) == versions


def test_empty_model_config_still_has_a_model_config_list():
    config = parse_config(model_config_text([]))
    assert config.HasField("model_config_list")
    assert len(config.model_config_list.config) == 0


def test_batching_parameters_text():
    settings = Settings.from_env(
        {
            "SAGEMAKER_TFS_MAX_BATCH_SIZE": "32",
            "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "0",
            "SAGEMAKER_TFS_NUM_BATCH_THREADS": "3",
            "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "100",
        },
        cpu_count=8,
    )
    text = batching_parameters_text(settings)
    assert text == (
        "max_batch_size { value: 32 }\n"
        "batch_timeout_micros { value: 0 }\n"
        "num_batch_threads { value: 3 }\n"
        "max_enqueued_batches { value: 100 }\n"
    )


def test_batching_parameters_parse_as_tf_serving_batching_parameters():
    settings = Settings.from_env({"SAGEMAKER_BATCH": "true"}, cpu_count=6)
    params = BatchingParameters()
    text_format.Parse(batching_parameters_text(settings), params)
    # Batch Transform: MultiRecord tasks of any size are split into batches of 8
    assert params.max_batch_size.value == 10_000_000
    assert params.enable_large_batch_splitting.value is True
    assert params.max_execution_batch_size.value == 8
    assert params.batch_timeout_micros.value == 1000
    assert params.num_batch_threads.value == 6
    assert params.max_enqueued_batches.value == 100_000_000
