"""cli.flags: tensorflow_model_server's command line, its values and its cross-flag rules."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tfs_model_server.cli import flags
from tfs_model_server.errors import ServingError
from tfs_model_server.options import ServerOptions


def test_values_in_both_forms_and_booleans() -> None:
    options = flags.parse(
        [
            "--port",
            "9000",
            "--rest_api_port=8501",
            "--enable_batching",
            "--enable_model_warmup=false",
        ]
    )
    assert (options.port, options.rest_api_port) == (9000, 8501)
    assert options.enable_batching and not options.enable_model_warmup
    assert options.model_name == "default"  # TF Serving's defaults for the rest


def test_flags_that_change_nothing_here_are_kept_aside() -> None:
    options = flags.parse(["--num_tflite_interpreters_per_pool=4", "--model_base_path=/m"])
    assert options.ignored == {"num_tflite_interpreters_per_pool": 4}
    flags.validate(options)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port"], "Missing value for flag --port"),
        (["--port=x"], "Illegal value for flag --port: 'x' (expected an integer)"),
        (["--port=4294967296"], "Illegal value for flag --port: '4294967296' (out of int32 range)"),
        (["--enable_batching=maybe"], "Illegal value for flag --enable_batching: 'maybe'"),
    ],
)
def test_parse_errors(argv: list[str], message: str) -> None:
    with pytest.raises(flags.FlagError) as info:
        flags.parse(argv)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--model_base_path=/m", "--rest_api_port=70000"],
            "Illegal value for flag --rest_api_port",
        ),
        (["--model_base_path=/m", "--grpc_max_threads=0"], "Illegal value for flag --grpc_max"),
        (
            ["--model_base_path=/m", "--num_unload_threads=-1"],
            "Illegal value for flag --num_unload_threads: must not be negative",
        ),
    ],
)
def test_validate(argv: list[str], message: str) -> None:
    with pytest.raises(flags.FlagError) as info:
        flags.validate(flags.parse(argv))
    assert str(info.value).startswith(message)


def test_unknown_arguments_are_kept_aside_as_tensorflow_flags_passes_them_through() -> None:
    options = flags.parse(["--nope=1", "positional", "--port=9", "--", "--port=10"])
    assert options.unknown == ["--nope=1", "positional", "--", "--port=10"]
    assert options.port == 9


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # server.cc's BuildAndStart, in its order
        (
            ["--port=0"],
            "At least one of server_options.grpc_port or server_options.grpc_socket_path must "
            "be set.",
        ),
        ([], "Both server_options.model_base_path and server_options.model_config_file are empty!"),
        (
            ["--model_base_path=/m", "--batching_parameters_file=/b"],
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true.",
        ),
    ],
)
def test_validate_refuses_what_build_and_start_refuses(argv: list[str], message: str) -> None:
    with pytest.raises(ServingError) as info:
        flags.validate(flags.parse(argv))
    assert info.value.status_text() == f"INVALID_ARGUMENT: {message}"


def test_usage_describes_every_flag_in_a_line_and_marks_the_ignored_ones() -> None:
    """As tensorflow_model_server --help: `--name=default`, its type and what it does."""
    lines = flags.usage().splitlines()
    assert lines[:2] == ["usage: tfs-model-server", "Flags:"]
    described = {}
    for line in lines[2:]:
        flag, kind, text = line.strip().split("\t")
        name, _, default = flag.strip().removeprefix("--").partition("=")
        assert kind in ("bool", "int32", "int64", "float", "string") and text.strip(), line
        described[name] = (default, kind, text)
    names = [f.name for f in fields(ServerOptions) if f.name not in ("ignored", "unknown")]
    assert sorted(described) == sorted([*names, *flags.IGNORED_FLAGS])  # each once
    assert described["port"][:2] == ("8500", "int32")
    assert described["model_name"][:2] == ('"default"', "string")
    assert described["enable_batching"][:2] == ("false", "bool")
    for name in flags.IGNORED_FLAGS:
        assert described[name][2].startswith("accepted, ignored here"), name
    assert not any("ignored" in described[name][2] for name in names)
