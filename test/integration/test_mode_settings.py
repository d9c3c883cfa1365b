"""Settings the hosting modes need (docs/hosting-modes.md): extra model server flags, /ping out
of the access log, and /metrics read as a Prometheus scraper reads it."""

from __future__ import annotations

import time

import psutil
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import run_serve, serve_stack


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import example_models as em

    root = tmp_path_factory.mktemp("mode_settings")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    return root


def _model_server_command(server) -> list[str]:
    for proc in psutil.Process(server.proc.pid).children(recursive=True):
        line = proc.cmdline()
        if any("model_server" in part or "model-server" in part for part in line[:2]):
            return line
    raise AssertionError("no model server process")


def test_extra_flags_reach_the_model_server_after_serve_s_own(model_dir, tmp_path):
    flags = "--rest_api_timeout_in_ms=7000 --enable_model_warmup=false"
    env = {"SAGEMAKER_TFS_MODEL_SERVER_FLAGS": flags, "SAGEMAKER_LOG_PING": "false"}
    with serve_stack(model_dir, tmp_path, env) as server:
        command = _model_server_command(server)
        assert command[-2:] == flags.split()  # after serve's own: the model server takes these
        timeouts = [arg for arg in command if arg.startswith("--rest_api_timeout_in_ms=")]
        assert timeouts == ["--rest_api_timeout_in_ms=60000", "--rest_api_timeout_in_ms=7000"]
        reply = requests.post(f"{server.url}/invocations", data="1.0", timeout=30)
        assert reply.json() == {"predictions": [3.5]}
        for _ in range(3):
            assert requests.get(f"{server.url}/ping", timeout=5).status_code == 200
        deadline = time.monotonic() + 10  # nginx writes its access log within a second
        while '"POST /invocations' not in (log := server.log_path.read_text()):
            assert time.monotonic() < deadline, log[-2000:]
            time.sleep(0.2)
        assert '"GET /ping' not in log

        deadline = time.monotonic() + 10  # counted within a second or so (request_counts.py)
        while True:
            text = requests.get(f"{server.url}/metrics", timeout=10).text
            families = {f.name: f for f in text_string_to_metric_families(text)}
            requests_total = families["sagemaker_requests"]
            routes = {s.labels["route"] for s in requests_total.samples}
            if {"/invocations", "/ping"} <= routes or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert requests_total.type == "counter"
        assert {"/invocations", "/ping"} <= routes, text  # out of the log, still counted
        assert families["sagemaker_request_duration_seconds"].type == "histogram"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ("--port=9999", "SAGEMAKER_TFS_MODEL_SERVER_FLAGS: serve sets --port itself"),
        ("--no_such_flag=1", "SAGEMAKER_TFS_MODEL_SERVER_FLAGS: --no_such_flag is not a flag of"),
        ("port=1", "SAGEMAKER_TFS_MODEL_SERVER_FLAGS: expected --name=value flags"),
    ],
)
def test_a_flag_the_model_server_does_not_take_stops_the_start_saying_which(
    model_dir, tmp_path, flags, said
):
    result = run_serve(model_dir, tmp_path, {"SAGEMAKER_TFS_MODEL_SERVER_FLAGS": flags})
    assert result.returncode != 0
    assert said in result.stdout + result.stderr, result.stdout[-2000:]
