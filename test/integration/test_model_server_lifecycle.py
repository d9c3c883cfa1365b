"""tfs-model-server command line, start-up failures, version polling, warmup, timeouts."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import requests

import example_models as em
from conftest import VENV_BIN, model_server, start_model_server
from model_server_process import ModelServerProcess

SERVER = str(VENV_BIN / "tfs-model-server")


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([SERVER, *args], capture_output=True, text=True, timeout=timeout)


def start_once(args: list[str], log_path: Path) -> ModelServerProcess:
    """A server started with args and no load retries (a failed load ends its start-up)."""
    return start_model_server([*args, "--max_num_load_retries=0"], log_path, timeout=60)


def test_version_flag():
    result = run_cli("--version")
    assert result.returncode == 0
    assert "TensorFlow ModelServer" in result.stdout and "TensorFlow Library" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        # a flag's bad value: the usage, as tensorflow::Flags::Parse refuses it
        (["--port=abc", "--model_base_path=/x"], "Illegal value for flag --port"),
        (
            ["--enable_batching=maybe", "--model_base_path=/x"],
            "Illegal value for flag --enable_batching",
        ),
        # what BuildAndStart refuses
        (
            ["--port=8500"],
            "Failed to start server. Error: INVALID_ARGUMENT: Both server_options.model_base_path",
        ),
        (
            ["--batching_parameters_file=/tmp/x", "--model_base_path=/x"],
            "Error: INVALID_ARGUMENT: server_options.batching_parameters_file is set without",
        ),
        # an unknown argument is named, and the start goes on (here to a refusal)
        (["--no_such_flag=1", "--port=0", "--model_base_path=/x"], "unknown argument: --no_such"),
        (["--no_such_flag=1", "--port=0", "--model_base_path=/x"], "INVALID_ARGUMENT: At least"),
    ],
)
def test_bad_command_lines_are_rejected(args, fragment):
    result = run_cli(*args)
    assert result.returncode == 255  # tensorflow_model_server's main() returns -1
    assert fragment in result.stdout + result.stderr


def test_a_config_file_that_does_not_parse_is_reported_as_tf_serving_does(tmp_path):
    config = tmp_path / "models.config"
    config.write_text("improperly formatted\n")
    result = run_cli(
        f"--model_config_file={config}", "--port=0", f"--grpc_socket_path={tmp_path}/s"
    )
    assert result.returncode == 255
    assert (
        "Error parsing text-format tensorflow.serving.ModelServerConfig: 1:1: Message type "
        '"tensorflow.serving.ModelServerConfig" has no field named "improperly".'
    ) in result.stderr.splitlines()
    assert (
        f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{config}'"
        in result.stdout
    )


def test_failed_load_ends_start_up(tmp_path):
    bad = tmp_path / "bad" / "1"
    bad.mkdir(parents=True)
    (bad / "saved_model.pb").write_bytes(b"not a saved model")
    server = start_once([f"--model_base_path={tmp_path / 'bad'}"], tmp_path / "log")
    assert server.proc.wait(60) != 0
    assert "Failed to start server" in server.log()


def test_the_session_config_file_reaches_every_session(tmp_path):
    """A file that leaves TF no CPU device makes the load fail (so the file is applied); one
    that turns thread spinning off serves as before, with bfloat16 mixed precision too."""
    base = tmp_path / "hp"
    em.half_plus_two_tf1(base, version=1)
    no_cpu = tmp_path / "no_cpu.config"
    no_cpu.write_text('device_count { key: "CPU" value: 0 }\n')
    server = start_once(
        [f"--model_base_path={base}", f"--tensorflow_session_config_file={no_cpu}"],
        tmp_path / "log-no-cpu",
    )
    try:
        assert server.proc.wait(60) != 0
    finally:
        server.stop()
    assert "No CPU devices are available in this process" in server.log()
    assert "Failed to start server" in server.log()
    quiet = tmp_path / "quiet.config"
    quiet.write_text("experimental { disable_thread_spinning: true }\n")
    with model_server(
        [
            f"--model_base_path={base}",
            "--model_name=hp",
            f"--tensorflow_session_config_file={quiet}",
            "--tensorflow_intra_op_parallelism=1",
            "--mixed_precision=bfloat16",
        ],
        tmp_path / "log-quiet",
        "hp",
    ) as server:
        reply = requests.post(
            f"{server.rest}/v1/models/hp:predict", json={"instances": [1.0, 2.0]}, timeout=10
        )
        assert reply.json() == {"predictions": [2.5, 3.0]}  # exact in bfloat16 too
        assert "Running inference with bfloat16 auto mixed precision" in server.log()


def test_a_session_config_file_that_does_not_parse_stops_the_start(tmp_path):
    config = tmp_path / "session.config"
    config.write_text("intra_op_parallelism_threads: many\n")
    result = run_cli(f"--model_base_path={tmp_path}", f"--tensorflow_session_config_file={config}")
    assert result.returncode == 255
    assert (
        f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{config}'"
        in result.stdout
    )


def test_new_versions_are_polled_and_old_ones_unloaded(tmp_path):
    base = tmp_path / "hp"
    em.half_plus_two_tf1(base, version=1)
    with model_server(
        [f"--model_base_path={base}", "--model_name=hp", "--file_system_poll_wait_seconds=1"],
        tmp_path / "log",
        "hp",
    ) as server:
        em.half_plus_three_tf1(tmp_path / "next", versions=(2,))
        shutil.copytree(tmp_path / "next" / "2", base / "2")
        deadline = time.monotonic() + 60
        states: dict = {}
        while time.monotonic() < deadline:
            status = requests.get(f"{server.rest}/v1/models/hp", timeout=10).json()
            states = {s["version"]: s["state"] for s in status["model_version_status"]}
            if states == {"2": "AVAILABLE", "1": "END"}:
                break
            time.sleep(0.5)
        assert states == {"2": "AVAILABLE", "1": "END"}
        reply = requests.post(
            f"{server.rest}/v1/models/hp:predict", json={"instances": [2.0]}, timeout=10
        )
        assert reply.json() == {"predictions": [4.0]}


def test_warmup_records_are_replayed_and_bad_ones_fail_the_load(tmp_path):
    good = tmp_path / "good"
    em.half_plus_two_tf1(good, version=1)
    em.write_warmup_requests(good / "1", [em.predict_log("m", {"x": np.array([1.0], np.float32)})])
    with model_server(
        [f"--model_base_path={good}", "--model_name=m"], tmp_path / "g.log", "m"
    ) as server:
        assert "Number of warmup records read: 1" in server.log()
    bad = tmp_path / "bad"
    em.half_plus_two_tf1(bad, version=1)
    em.write_warmup_requests(
        bad / "1", [em.predict_log("m", {"nope": np.array([1.0], np.float32)})]
    )
    server = start_once([f"--model_base_path={bad}", "--model_name=m"], tmp_path / "b.log")
    assert server.proc.wait(60) != 0
    assert "Failed to start server" in server.log()


def test_rest_timeout_gives_504(tmp_path):
    base = tmp_path / "slow"
    em.slow_model(base)
    with model_server(
        [f"--model_base_path={base}", "--model_name=slow", "--rest_api_timeout_in_ms=300"],
        tmp_path / "log",
        "slow",
    ) as server:
        meta = requests.get(f"{server.rest}/v1/models/slow/metadata", timeout=10).json()
        sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        body = {"inputs": {name: em.SLOW_MODEL_EXAMPLE_INPUTS[name] for name in sig["inputs"]}}
        started = time.monotonic()
        reply = requests.post(f"{server.rest}/v1/models/slow:predict", json=body, timeout=30)
        assert reply.status_code == 504, reply.text
        assert "error" in reply.json()
        assert time.monotonic() - started < 5
        assert requests.get(f"{server.rest}/v1/models/slow", timeout=10).status_code == 200


def test_prometheus_metrics_with_tf_serving_names(tmp_path, model_root):
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true, path: "/metrics/tfs" }\n')
    with model_server(
        [
            f"--model_base_path={model_root}/half_plus_two",
            "--model_name=hp",
            f"--monitoring_config_file={monitoring}",
        ],
        tmp_path / "log",
        "hp",
    ) as server:
        for _ in range(3):
            requests.post(
                f"{server.rest}/v1/models/hp:predict", json={"instances": [1.0]}, timeout=10
            )
        requests.post(f"{server.rest}/v1/models/hp:predict", json={"instances": ["x"]}, timeout=10)
        reply = requests.get(f"{server.rest}/metrics/tfs", timeout=10)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    text = reply.text
    assert ':tensorflow:serving:request_count{model_name="hp",status="OK"} 3' in text
    assert ':tensorflow:serving:request_count{model_name="hp",status="INVALID_ARGUMENT"} 1' in text
    assert "# TYPE :tensorflow:serving:request_latency histogram" in text
    assert (
        ':tensorflow:serving:request_latency_count{model_name="hp",API="predict",'
        'entrypoint="REST"} 3' in text
    )


def _wait_for_states(server, model: str, wanted: dict, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    states: dict = {}
    while time.monotonic() < deadline:
        reply = requests.get(f"{server.rest}/v1/models/{model}", timeout=10)
        if reply.status_code == 200:
            states = {s["version"]: s["state"] for s in reply.json()["model_version_status"]}
            if states == wanted:
                break
        time.sleep(0.5)
    return states


def test_config_file_polling_and_specific_versions(tmp_path, model_root):
    config = tmp_path / "models.config"
    first = (
        "model_config_list { config { name: 'a' base_path: '%s' model_platform: 'tensorflow' } }"
        % (model_root / "half_plus_two")
    )
    config.write_text(first)
    args = [f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=1"]
    with model_server(args, tmp_path / "log", "a") as server:
        config.write_text(
            "model_config_list {\n"
            f"  config {{ name: 'a' base_path: '{model_root / 'half_plus_two'}'"
            " model_platform: 'tensorflow' }\n"
            f"  config {{ name: 'b' base_path: '{model_root / 'half_plus_three'}'"
            " model_platform: 'tensorflow'\n"
            "    model_version_policy { specific { versions: 123 } } }\n"
            "}\n"
        )
        assert _wait_for_states(server, "b", {"123": "AVAILABLE"}) == {"123": "AVAILABLE"}
        reply = requests.post(
            f"{server.rest}/v1/models/b/versions/124:predict", json={"instances": [1.0]}, timeout=10
        )
        assert reply.status_code == 404
        config.write_text(first)
        assert _wait_for_states(server, "b", {"123": "END"}) == {"123": "END"}
        reply = requests.post(
            f"{server.rest}/v1/models/b:predict", json={"instances": [1.0]}, timeout=10
        )
        assert reply.status_code == 404
