"""serve refuses to start, with a message that says why, and exits non-zero."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import SERVE, free_port_range


def run_serve(model_dir: Path, tmp: Path, env: dict[str, str], timeout: float = 120):
    port, high = free_port_range(5)
    low = port + 1
    settings = {
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}",
        **env,
    }
    return subprocess.run(
        [
            SERVE,
            "--model-dir",
            str(model_dir),
            "--run-dir",
            str(tmp / "run"),
            "--host",
            "127.0.0.1",
        ],
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def good_models(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("good")
    em.half_plus_two_tf1(root / "half_plus_two")
    return root


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SAGEMAKER_TFS_ENABLE_BATCHING": "yes"}, "SAGEMAKER_TFS_ENABLE_BATCHING"),
        ({"SAGEMAKER_TFS_INSTANCE_COUNT": "0"}, "SAGEMAKER_TFS_INSTANCE_COUNT"),
        ({"SAGEMAKER_BIND_TO_PORT": "http"}, "SAGEMAKER_BIND_TO_PORT"),
        ({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "missing"}, "missing"),
    ],
)
def test_invalid_settings_name_the_variable(good_models, tmp_path, env, variable):
    result = run_serve(good_models, tmp_path, env, timeout=60)
    assert result.returncode == 2
    assert "cannot start" in result.stderr and variable in result.stderr


def test_no_model_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_serve(tmp_path / "empty", tmp_path, {}, timeout=60)
    assert result.returncode == 2
    assert "SavedModel" in result.stderr


def test_a_model_server_that_cannot_load_its_model_stops_serve(tmp_path):
    broken = tmp_path / "models" / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"this is not a SavedModel")
    result = run_serve(tmp_path / "models", tmp_path, {"SAGEMAKER_TFS_WAIT_TIME_SECONDS": "60"})
    assert result.returncode == 1
    assert re.search(r"model-server-0 exited with code [1-9]\d* during start-up", result.stderr)


def test_batching_settings_reach_the_model_server(good_models, tmp_path):
    import requests
    from conftest import serve_stack

    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", "SAGEMAKER_TFS_MAX_BATCH_SIZE": "4"}
    with serve_stack(good_models, tmp_path, env) as server:
        config = (server.run_dir / "batching-config.cfg").read_text()
        assert "max_batch_size { value: 4 }" in config
        reply = requests.post(f"{server.url}/invocations", data="[1.0, 2.0]", timeout=30)
        assert reply.json() == {"predictions": [[2.5, 3.0]]}
        # more rows than max_batch_size: TF Serving's batching answers 400, as a JSON body
        body = '{"instances": [1.0, 2.0, 3.0, 4.0, 5.0]}'
        reply = requests.post(f"{server.url}/invocations", data=body, timeout=30)
        assert reply.status_code == 400 and "batch" in reply.json()["error"].lower()
