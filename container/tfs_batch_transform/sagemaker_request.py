"""`--print-sagemaker-request`: the CreateTransformJob request (boto3's parameter names) that
runs a local job's settings on SageMaker Batch Transform.

Settings equal to SageMaker's defaults are left out, as are the parameters the local run would
take from the container's /execution-parameters (SageMaker asks the same container). The request
is checked against botocore's own model of the operation (lengths, ranges, patterns, enums), and
a problem is a ConfigError naming the flag.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from .job import DEFAULT_INVOCATIONS_TIMEOUT, DEFAULT_MAX_RETRIES, ConfigError, JobConfig
from .sources import is_s3

OPERATION = "CreateTransformJob"
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"
REQUEST_FLAG = "--print-sagemaker-request"
# The flag behind each request member, for error messages (the innermost named member wins).
_FLAGS = {
    "TransformJobName": "--job-name",
    "ModelName": "--model-name",
    "Environment": "--env",
    "S3Uri": "--input",
    "S3OutputPath": "--output",
    "ContentType": "--content-type",
    "Accept": "--accept",
    "InstanceType": "--instance-type",
    "InstanceCount": "--instance-count",
    "MaxConcurrentTransforms": "--max-concurrent-transforms",
    "MaxPayloadInMB": "--max-payload-in-mb",
    "InputFilter": "--input-filter",
    "OutputFilter": "--output-filter",
}


@dataclass(frozen=True)
class SageMakerTarget:
    """What only SageMaker needs: the model (as created by CreateModel), job name, instances."""

    model_name: str
    job_name: str
    instance_type: str = DEFAULT_INSTANCE_TYPE
    instance_count: int = 1


def default_job_name(now: datetime | None = None) -> str:
    """`tfs-batch-transform-YYYYMMDD-HHMMSS` (UTC): unique enough for one user's jobs."""
    return f"tfs-batch-transform-{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"


def transform_job_request(config: JobConfig, target: SageMakerTarget) -> dict[str, Any]:
    """The `create_transform_job` parameters for `config`; ConfigError names a bad flag."""
    _require_s3(config)
    # checked as the local run checks them; where the job runs does not matter here
    dataclasses.replace(config, endpoints=["sagemaker"], model_dir=None).validate()
    request: dict[str, Any] = {
        "TransformJobName": target.job_name,
        "ModelName": target.model_name,
        **_batch_parameters(config),
        **_environment(config),
        "TransformInput": _transform_input(config),
        "TransformOutput": _transform_output(config),
        "TransformResources": {
            "InstanceType": target.instance_type,
            "InstanceCount": target.instance_count,
        },
        **_data_processing(config),
    }
    check_request(request)
    return request


def _require_s3(config: JobConfig) -> None:
    for flag, url in (("--input", config.input), ("--output", config.output)):
        if not is_s3(url) or not url[len("s3://") :].partition("/")[0]:
            raise ConfigError(
                flag, f"{REQUEST_FLAG} needs an s3://bucket/prefix location, got {url!r}"
            )


def _batch_parameters(config: JobConfig) -> dict[str, Any]:
    """The ones given (0 concurrent transforms means the container's, as when not given)."""
    params: dict[str, Any] = {}
    if config.max_concurrent_transforms:
        params["MaxConcurrentTransforms"] = config.max_concurrent_transforms
    client = {}
    if config.invocations_timeout != DEFAULT_INVOCATIONS_TIMEOUT:
        client["InvocationsTimeoutInSeconds"] = int(config.invocations_timeout)
    if config.max_retries != DEFAULT_MAX_RETRIES:
        client["InvocationsMaxRetries"] = config.max_retries
    if client:
        params["ModelClientConfig"] = client
    if config.max_payload_in_mb is not None:
        params["MaxPayloadInMB"] = config.max_payload_in_mb
    if config.batch_strategy is not None:
        params["BatchStrategy"] = config.batch_strategy
    return params


def _environment(config: JobConfig) -> dict[str, Any]:
    """`--env` is the job's Environment (added to the model's; SageMaker sets the batch ones)."""
    return {"Environment": dict(config.container_env)} if config.container_env else {}


def _transform_input(config: JobConfig) -> dict[str, Any]:
    source = {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": config.input}}
    result: dict[str, Any] = {"DataSource": source}
    if config.content_type:
        result["ContentType"] = config.content_type
    # the local runner sends objects as stored: no decompression
    result["CompressionType"] = "None"
    if config.split_type != "None":
        result["SplitType"] = config.split_type
    return result


def _transform_output(config: JobConfig) -> dict[str, Any]:
    result: dict[str, Any] = {"S3OutputPath": config.output}
    if config.accept:
        result["Accept"] = config.accept
    if config.assemble_with != "None":
        result["AssembleWith"] = config.assemble_with
    return result


def _data_processing(config: JobConfig) -> dict[str, Any]:
    given = {
        name: value
        for name, value, default in (
            ("InputFilter", config.input_filter, "$"),
            ("OutputFilter", config.output_filter, "$"),
            ("JoinSource", config.join_source, "None"),
        )
        if value != default
    }
    return {"DataProcessing": given} if given else {}


# ----------------------------------------------------------------------------- checking


@cache
def operation_model() -> Any:
    """botocore's model of CreateTransformJob (from the installed botocore; no network)."""
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker").operation_model(OPERATION)


def check_request(request: Mapping[str, Any]) -> None:
    """Raise ConfigError (naming the flag) for the first value botocore's model rejects."""
    for path, problem in _problems(request, operation_model().input_shape, ""):
        raise ConfigError(_flag(path), f"{problem} ({path} in {OPERATION})")


def _flag(path: str) -> str:
    names = [name for name in reversed(path.split(".")) if name in _FLAGS]
    return _FLAGS[names[0]] if names else REQUEST_FLAG


def _problems(value: Any, shape: Any, path: str) -> Iterator[tuple[str, str]]:
    if shape.type_name == "structure":
        yield from _structure_problems(value, shape, path)
    elif shape.type_name == "map":
        yield from _size_problems(len(value), shape, path, "entries")
        for key, item in value.items():
            yield from _problems(key, shape.key, f"{path}.{key}")
            yield from _problems(item, shape.value, f"{path}.{key}")
    elif shape.type_name == "string":
        yield from _string_problems(value, shape, path)
    elif shape.type_name == "integer":
        yield from _size_problems(value, shape, path, "")


def _structure_problems(
    value: Mapping[str, Any], shape: Any, path: str
) -> Iterator[tuple[str, str]]:
    prefix = f"{path}." if path else ""
    for name in shape.required_members:
        if name not in value:
            yield prefix + name, "required"
    for name, item in value.items():
        if name not in shape.members:
            yield prefix + name, "unknown parameter"
        else:
            yield from _problems(item, shape.members[name], prefix + name)


def _size_problems(size: int, shape: Any, path: str, unit: str) -> Iterator[tuple[str, str]]:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    what = f"{size} {unit}".strip()
    if low is not None and size < low:
        yield path, f"{what} is below the minimum {low}"
    if high is not None and size > high:
        yield path, f"{what} is above the maximum {high}"


def _string_problems(value: str, shape: Any, path: str) -> Iterator[tuple[str, str]]:
    if shape.enum and value not in shape.enum:
        yield path, f"{value!r} is not one of botocore's {shape.name} values"
    yield from _size_problems(len(value), shape, path, "characters")
    pattern = shape.metadata.get("pattern")
    if pattern and not _matches(pattern, value):
        yield path, f"{value!r} does not match {pattern}"


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:  # a Java-only construct: leave it to the service
        return True
