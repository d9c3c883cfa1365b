"""sagemaker_serving.config.service_config: what serve tells the Python service, as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from sagemaker_serving.config.service_config import ServiceConfig


def test_a_config_reads_back_as_written(tmp_path: Path):
    config = ServiceConfig(
        code_dir="/opt/ml/model/code",
        default_model="m",
        rest_ports=[8501, 8503],
        grpc_ports=[9000, 9002],
        request_timeout_seconds=59.0,
        python_paths=["/run/python-packages", "/opt/ml/model/code"],
        multi_model=True,
        model_root="/opt/ml/models",
        state_dir="/run/multi-model",
        load_timeout_seconds=300.0,
        memory_reserve_bytes=256 << 20,
    )
    path = tmp_path / "service.json"
    path.write_text(config.to_json())
    assert ServiceConfig.from_file(path) == config
    assert json.loads(path.read_text())["rest_ports"] == [8501, 8503]


def test_single_model_defaults(tmp_path: Path):
    path = tmp_path / "service.json"
    path.write_text(ServiceConfig("/code", "m", [8501], [9000], 29.0).to_json())
    config = ServiceConfig.from_file(path)
    assert (config.multi_model, config.python_paths, config.memory_reserve_bytes) == (False, [], 0)
