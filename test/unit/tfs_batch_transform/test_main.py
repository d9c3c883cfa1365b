"""tfs-batch-transform's command line: bad flags are argparse errors naming the flag."""

from __future__ import annotations

import pytest

from tfs_batch_transform.main import build_parser, config_from_args, main

BASE = ["--endpoint", "http://127.0.0.1:9", "--input", "in", "--output", "out"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-payload-in-mb", "101"], "argument --max-payload-in-mb: 101 is not in 0..100"),
        (["--max-retries", "4"], "argument --max-retries: 4 is not in 0..3"),
        (["--invocations-timeout", "0"], "argument --invocations-timeout"),
        (["--split-type", "Lines"], "argument --split-type: invalid choice"),
        (["--batch-strategy", "MULTI"], "argument --batch-strategy: invalid choice"),
        (["--env", "A=1"], "argument --env: only with --model-dir"),
        (["--model-dir", "m"], "argument --model-dir: not allowed with argument --endpoint"),
        (
            ["--max-concurrent-transforms", "20", "--max-payload-in-mb", "6"],
            "argument --max-concurrent-transforms: x --max-payload-in-mb must not exceed 100",
        ),
        (["--input-filter", "$..x"], "argument --input-filter: '$..x': unsupported syntax"),
        (["--output-filter", "features"], "argument --output-filter: 'features' must start"),
        (
            ["--join-source", "Input", "--split-type", "Line", "--content-type", "text/csv"],
            "argument --join-source: Input needs --assemble-with equal to --split-type",
        ),
        (
            ["--join-source", "Input", "--content-type", "text/csv", "--accept", "text/csv"],
            "argument --split-type: data processing of CSV needs Line",
        ),
        (
            ["--input-filter", "$[1:]", "--content-type", "application/x-image"],
            "argument --content-type: data processing supports only",
        ),
    ],
)
def test_bad_flags_name_the_flag(extra, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*BASE, *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_output_inside_input_is_refused(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    argv = ["--endpoint", "http://127.0.0.1:9", "--input", str(tmp_path / "in")]
    with pytest.raises(SystemExit):
        main([*argv, "--output", str(tmp_path / "in" / "out")])
    assert "argument --output:" in capsys.readouterr().err


def test_flags_map_to_the_job_config():
    args = build_parser().parse_args(
        [
            *BASE,
            "--endpoint",
            "http://127.0.0.1:10",
            "--split-type",
            "TFRecord",
            "--batch-strategy",
            "MultiRecord",
            "--max-payload-in-mb",
            "0",
            "--content-type",
            "application/x-tfexample",
            "--resume",
        ]
    )
    config = config_from_args(args)
    assert config.endpoints == ["http://127.0.0.1:9", "http://127.0.0.1:10"]
    assert (config.split_type, config.batch_strategy, config.max_payload_in_mb) == (
        "TFRecord",
        "MultiRecord",
        0,
    )
    assert config.max_concurrent_transforms is None  # from /execution-parameters
    assert (config.invocations_timeout, config.max_retries, config.resume) == (600, 3, True)
    config.validate()
