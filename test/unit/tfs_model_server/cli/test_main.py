"""cli.main: `tfs-model-server` exit codes and what it prints before serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfs_model_server.cli.main import main


@pytest.fixture(autouse=True)
def _tf_log_level(monkeypatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # main() sets a default when unset


def test_help(capsys) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: tfs-model-server\nFlags:\n")


def test_a_bad_command_line_is_2(capsys) -> None:
    assert main(["--no_such_flag=1"]) == 2
    assert capsys.readouterr().err.startswith("unknown argument: --no_such_flag=1\nusage: ")


def test_version(capsys) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TensorFlow ModelServer: tfs-model-server ")
    assert "\nTensorFlow Library: " in out


def test_a_missing_config_file_fails_the_start(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "models.config"
    assert main([f"--model_config_file={missing}"]) == 1
    assert capsys.readouterr().err == (
        f"Failed to start server. Error: --model_config_file: no such file: {missing}\n"
    )
