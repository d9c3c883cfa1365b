"""`tfs-batch-transform --print-sagemaker-request`: the CreateTransformJob request, checked
against botocore's own model of the SageMaker API (no AWS call, no container)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import botocore.client
import botocore.session
import pytest
from botocore.validate import ParamValidator

from tfs_batch_transform import main as cli
from tfs_batch_transform.job import JobConfig
from tfs_batch_transform.sagemaker_request import (
    DEFAULT_INSTANCE_TYPE,
    SageMakerTarget,
    default_job_name,
    transform_job_request,
)

S3 = ["--input", "s3://bucket/in/", "--output", "s3://bucket/out/"]
PRINT = ["--model-name", "tfs-model", "--job-name", "job-1", "--print-sagemaker-request"]
BASE_REQUEST: dict[str, Any] = {
    "TransformJobName": "job-1",
    "ModelName": "tfs-model",
    "TransformInput": {
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/in/"}},
        "CompressionType": "None",
    },
    "TransformOutput": {"S3OutputPath": "s3://bucket/out/"},
    "TransformResources": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """No AWS call and no job: any attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("no AWS call or job run expected")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse)
    monkeypatch.setattr(botocore.session.Session, "create_client", refuse)
    monkeypatch.setattr(cli, "run_job", refuse)


def input_shape() -> Any:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTransformJob").input_shape


def botocore_errors(request: dict[str, Any]) -> str:
    report = ParamValidator().validate(request, input_shape())
    return report.generate_report() if report.has_errors() else ""


def printed(argv: list[str], capsys) -> dict[str, Any]:
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("{\n  ")  # JSON, indent 2
    return json.loads(out)


def merged(**changes: Any) -> dict[str, Any]:
    request = json.loads(json.dumps(BASE_REQUEST))
    for name, value in changes.items():
        if isinstance(value, dict) and name in request:
            request[name].update(value)
        else:
            request[name] = value
    return request


CASES = {
    "defaults": ([], BASE_REQUEST),
    "csv lines with data processing and join": (
        [
            *("--content-type", "text/csv", "--accept", "text/csv"),
            *("--split-type", "Line", "--assemble-with", "Line"),
            *("--input-filter", "$[1:]", "--join-source", "Input", "--output-filter", "$[0,-1]"),
            *("--max-payload-in-mb", "6", "--max-concurrent-transforms", "4"),
        ],
        merged(
            MaxConcurrentTransforms=4,
            MaxPayloadInMB=6,
            TransformInput={"ContentType": "text/csv", "SplitType": "Line"},
            TransformOutput={"Accept": "text/csv", "AssembleWith": "Line"},
            DataProcessing={
                "InputFilter": "$[1:]",
                "OutputFilter": "$[0,-1]",
                "JoinSource": "Input",
            },
        ),
    ),
    "tfrecord multirecord json lines": (
        [
            *("--split-type", "TFRecord", "--batch-strategy", "MultiRecord"),
            *("--content-type", "application/x-tfexample", "--accept", "application/jsonlines"),
            *("--assemble-with", "Line", "--max-payload-in-mb", "0", "--resume"),
            *("--instance-type", "ml.c5.2xlarge", "--instance-count", "8"),
        ],
        merged(
            MaxPayloadInMB=0,
            BatchStrategy="MultiRecord",
            TransformInput={"ContentType": "application/x-tfexample", "SplitType": "TFRecord"},
            TransformOutput={"Accept": "application/jsonlines", "AssembleWith": "Line"},
            TransformResources={"InstanceType": "ml.c5.2xlarge", "InstanceCount": 8},
        ),
    ),
    "single-record images with timeouts": (
        [
            *("--content-type", "application/x-image", "--accept", "application/json"),
            *("--batch-strategy", "SingleRecord", "--max-concurrent-transforms", "8"),
            *("--invocations-timeout", "120", "--max-retries", "1"),
        ],
        merged(
            MaxConcurrentTransforms=8,
            ModelClientConfig={"InvocationsTimeoutInSeconds": 120, "InvocationsMaxRetries": 1},
            BatchStrategy="SingleRecord",
            TransformInput={"ContentType": "application/x-image"},
            TransformOutput={"Accept": "application/json"},
        ),
    ),
    "env vars, container's concurrency": (
        [
            *("--env", "SAGEMAKER_TFS_DEFAULT_MODEL_NAME=half_plus_three"),
            *("--env", "OMP_NUM_THREADS=2", "--max-concurrent-transforms", "0"),
            *("--content-type", "application/jsonlines", "--split-type", "Line"),
        ],
        merged(
            Environment={
                "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
                "OMP_NUM_THREADS": "2",
            },
            TransformInput={"ContentType": "application/jsonlines", "SplitType": "Line"},
        ),
    ),
    "json with a filter, from a --model-dir command": (
        [
            *("--model-dir", "run/models", "--content-type", "application/json"),
            *("--input-filter", "$.features"),
        ],
        merged(
            TransformInput={"ContentType": "application/json"},
            DataProcessing={"InputFilter": "$.features"},
        ),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_printed_request_is_valid_for_botocore(case, capsys):
    flags, expected = CASES[case]
    request = printed([*S3, *flags, *PRINT], capsys)
    assert request == expected
    assert botocore_errors(request) == ""
    resources = input_shape().members["TransformResources"].members
    assert request["TransformResources"]["InstanceType"] in resources["InstanceType"].enum


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "data/", "--output", "s3://b/out/"], "argument --input: --print-sagemaker"),
        (["--input", "s3://b/in/", "--output", "out/"], "argument --output: --print-sagemaker"),
        (["--input", "s3://", "--output", "s3://b/out/"], "argument --input:"),
        (["--input", "s3://b/in/", "--output", "s3://b/in/out/"], "argument --output: "),
    ],
)
def test_local_paths_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, *PRINT])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--instance-type", "m5.xlarge"], "argument --instance-type: 'm5.xlarge' is not one"),
        (["--instance-count", "0"], "argument --instance-count: 0 is not in >= 1"),
        (["--job-name", "job_1"], "argument --job-name: 'job_1' does not match"),
        (["--job-name", "j" * 64], "argument --job-name:"),
        (["--model-name", "my.model"], "argument --model-name: 'my.model' does not match"),
        (["--env", "1X=y"], "argument --env: '1X' does not match"),
        ([f"--env=V{i}=x" for i in range(17)], "argument --env: 17 entries is above the maximum"),
        (["--content-type", "x" * 257], "argument --content-type: 257 characters"),
        (["--join-source", "Input", "--content-type", "text/csv"], "argument --join-source:"),
    ],
)
def test_bad_request_values_name_the_flag(extra, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*S3, *PRINT, *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_model_name_is_required(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*S3, "--print-sagemaker-request"])
    assert exit_info.value.code == 2
    assert "argument --model-name: required with --print-sagemaker-request" in (
        capsys.readouterr().err
    )


def test_running_still_needs_an_endpoint_or_model_dir(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(S3)
    assert exit_info.value.code == 2
    assert "one of the arguments --endpoint --model-dir is required" in capsys.readouterr().err


def test_the_default_job_name_is_valid_and_dated(capsys):
    assert default_job_name(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)) == (
        "tfs-batch-transform-20240506-070809"
    )
    request = printed([*S3, "--model-name", "m", "--print-sagemaker-request"], capsys)
    assert re.fullmatch(r"tfs-batch-transform-\d{8}-\d{6}", request["TransformJobName"])
    assert request["TransformResources"]["InstanceType"] == DEFAULT_INSTANCE_TYPE
    assert botocore_errors(request) == ""


def test_library_use_matches_the_cli(capsys):
    config = JobConfig(
        input="s3://bucket/in/",
        output="s3://bucket/out/",
        content_type="text/csv",
        split_type="Line",
        batch_strategy="MultiRecord",
    )
    request = transform_job_request(config, SageMakerTarget("tfs-model", "job-1"))
    flags = ["--content-type", "text/csv", "--split-type", "Line", "--batch-strategy"]
    assert request == printed([*S3, *flags, "MultiRecord", *PRINT], capsys)
    assert botocore_errors(request) == ""
