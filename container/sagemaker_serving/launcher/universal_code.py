"""Inference code shared by every model: SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET/PREFIX on S3,
downloaded once at start-up into the run directory (boto3; AWS_ENDPOINT_URL is honoured)."""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

from sagemaker_serving.errors import StartupError

log = logging.getLogger(__name__)


class UniversalCodeError(StartupError):
    """The universal code could not be downloaded; the message says why."""


def download_universal_code(bucket: str, prefix: str, dest: Path) -> Path:
    """Every object under s3://bucket/prefix into `dest`, keeping the relative paths."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = prefix.strip("/")
    key_prefix = f"{prefix}/" if prefix else ""
    dest.mkdir(parents=True, exist_ok=True)
    count = 0
    try:
        s3 = boto3.client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix):
            for item in page.get("Contents", []):
                key = item["Key"]
                relative = PurePosixPath(key[len(key_prefix) :])
                if key.endswith("/") or not relative.parts:
                    continue
                if any(part in ("..", ".") for part in relative.parts):
                    raise UniversalCodeError(f"s3://{bucket}/{key}: key leaves the prefix")
                target = dest.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket, key, str(target))
                count += 1
    except (BotoCoreError, ClientError) as exc:
        raise UniversalCodeError(f"downloading s3://{bucket}/{key_prefix}: {exc}") from exc
    if count == 0:
        raise UniversalCodeError(f"s3://{bucket}/{key_prefix} holds no files")
    log.info("universal code: %d file(s) from s3://%s/%s into %s", count, bucket, key_prefix, dest)
    return dest
