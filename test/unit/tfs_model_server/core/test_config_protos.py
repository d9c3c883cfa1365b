"""core.config_protos: TF Serving's text-format config files, and how a bad one is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfs_model_server.core.config_protos import (
    read_batching_parameters,
    read_model_server_config,
    read_monitoring_config,
)
from tfs_model_server.errors import Code, ServingError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "file.config"
    path.write_text(text)
    return path


def test_model_server_config(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "model_config_list { config { name: 'm' base_path: '/m' model_platform: 'tensorflow'"
        " model_version_policy { latest { num_versions: 2 } } } }",
    )
    [config] = read_model_server_config(path).model_config_list.config
    assert (config.name, config.model_version_policy.latest.num_versions) == ("m", 2)


def test_the_protos_tensorflow_serving_api_does_not_ship(tmp_path: Path) -> None:
    batching = read_batching_parameters(
        _write(tmp_path, "max_batch_size { value: 4 } allowed_batch_sizes: 4")
    )
    assert (batching.max_batch_size.value, list(batching.allowed_batch_sizes)) == (4, [4])
    assert not batching.HasField("batch_timeout_micros")
    monitoring = read_monitoring_config(
        _write(tmp_path, "prometheus_config { enable: true path: '/metrics' }")
    )
    assert (monitoring.prometheus_config.enable, monitoring.prometheus_config.path) == (
        True,
        "/metrics",
    )


def test_a_file_that_does_not_parse(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, "improperly formatted\n")
    with pytest.raises(ServingError) as info:
        read_model_server_config(path)
    assert (info.value.code, info.value.message) == (
        Code.INVALID_ARGUMENT,
        f"Invalid protobuf file: '{path}'",
    )
    assert capsys.readouterr().err.startswith(
        "Error parsing text-format tensorflow.serving.ModelServerConfig: 1:1: "
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "ModelServerConfig must hold a model_config_list"),
        (None, "Failed to read model config file "),
    ],
)
def test_files_that_hold_no_model_list(tmp_path: Path, text, message) -> None:
    path = _write(tmp_path, text) if text is not None else tmp_path / "missing.config"
    with pytest.raises(ServingError) as info:
        read_model_server_config(path)
    assert info.value.message.startswith(message)
