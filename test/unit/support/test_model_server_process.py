"""process: a model server child process's command line, and its status over REST."""

from __future__ import annotations

from pathlib import Path

from model_server_process import ModelServerProcess, model_states
from process_utils import free_port


def test_our_server_also_binds_the_host(tmp_path: Path) -> None:
    ours = ModelServerProcess(
        ["--model_name=m"], tmp_path / "log", 8501, 8500, "127.0.0.2", "/x/tfs-model-server"
    )
    assert ours.is_ours and ours.rest == "http://127.0.0.2:8501"
    assert ours.command() == [
        "/x/tfs-model-server",
        "--port=8500",
        "--rest_api_port=8501",
        "--bind_address=127.0.0.2",
        "--model_name=m",
    ]
    real = ModelServerProcess(
        [], tmp_path / "log", 1, 2, executable="/usr/bin/tensorflow_model_server"
    )
    assert not real.is_ours and real.command()[-1] == "--rest_api_port=1"
    assert not real.alive() and real.log() == "" and real.stop() is None


def test_model_states_of_a_server_that_does_not_answer() -> None:
    assert model_states(f"http://127.0.0.1:{free_port()}", "m", timeout=1) is None
