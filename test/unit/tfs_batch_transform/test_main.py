"""tfs-batch-transform's command line: bad flags are argparse errors naming the flag."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from process_utils import free_port
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
            "argument --max-concurrent-transforms: 20 x --max-payload-in-mb 6 = 120 MB, over "
            "SageMaker's 100 MB",
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
    first, *rest = capsys.readouterr().err.splitlines()
    assert first.startswith("tfs-batch-transform: error: ") and message in first, first
    assert rest == ["(tfs-batch-transform --help describes them all)"]  # not the usage block


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


def run_cli(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "tfs-batch-transform"), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def nobody_answers() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_a_missing_input_fails_before_waiting_for_the_endpoint(tmp_path):
    result = run_cli("--endpoint", nobody_answers(), "--input", str(tmp_path / "nothing"),
                     "--output", str(tmp_path / "out"), timeout=60)  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert f"input {tmp_path / 'nothing'} does not exist" in result.stderr
    assert "waiting" not in result.stderr


def test_waiting_for_an_endpoint_says_so_with_the_elapsed_time(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("1.0\n")
    url = nobody_answers()
    result = run_cli("--endpoint", url, "--input", str(tmp_path / "in"),
                     "--output", str(tmp_path / "out"), "--startup-timeout", "12",
                     timeout=120)  # fmt: skip
    assert result.returncode == 3, result.stderr
    waiting = [line for line in result.stderr.splitlines() if "waiting for" in line]
    assert waiting, result.stderr
    for line in waiting:
        assert re.search(rf"waiting for {url}/ping to answer 200 \(ConnectionError\): "
                         r"\d+ s of --startup-timeout 12$", line), line  # fmt: skip
    assert "did not answer 200 within 12 s" in result.stderr.splitlines()[-1]
