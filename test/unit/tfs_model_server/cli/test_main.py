"""cli.main: `tfs-model-server` exit codes and what it prints before serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfs_model_server.cli.main import main


@pytest.fixture(autouse=True)
def _tf_log_level(monkeypatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # main() sets a default when unset


@pytest.mark.parametrize("flag", ["--help", "-h", "--helpfull"])
def test_help_prints_the_usage_and_exits_0(capsys, flag) -> None:
    """Help asked for is no error (tensorflow_model_server's main() returns -1: 255)."""
    assert main([flag]) == 0
    assert capsys.readouterr().out.startswith("usage: tfs-model-server\nFlags:\n")


def test_a_bad_flag_value_prints_the_usage_and_exits_255(capsys) -> None:
    assert main(["--port=abc", "--model_base_path=/m"]) == 255
    printed = capsys.readouterr()
    assert printed.err.startswith("Illegal value for flag --port: 'abc'")
    assert printed.out.startswith("usage: tfs-model-server\n")


def test_an_unknown_argument_is_named_and_the_start_goes_on(capsys) -> None:
    """tensorflow::Flags::Parse passes unknown arguments through; main() names the first with
    the usage and goes on, here to BuildAndStart's refusal of a server with no model."""
    assert main(["--no_such_flag=1", "stray"]) == 255
    out = capsys.readouterr().out
    assert out.startswith("unknown argument: --no_such_flag=1\nusage: tfs-model-server\n")
    assert "stray" not in out
    assert out.endswith(
        "Failed to start server. Error: INVALID_ARGUMENT: Both server_options.model_base_path "
        "and server_options.model_config_file are empty!\n"
    )


def test_version(capsys) -> None:
    assert main(["--version", "--no_such_flag"]) == 0  # TF prints the version before all else
    out = capsys.readouterr().out
    assert out.startswith("TensorFlow ModelServer: tfs-model-server ")
    assert "\nTensorFlow Library: " in out


def test_a_missing_config_file_fails_the_start(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "models.config"
    assert main([f"--model_config_file={missing}"]) == 255
    assert capsys.readouterr().out == (
        f"Failed to start server. Error: NOT_FOUND: {missing}; No such file or directory\n"
    )
