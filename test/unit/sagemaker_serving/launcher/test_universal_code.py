"""sagemaker_serving.launcher.universal_code: shared inference code from S3 (moto's server on
loopback stands in for S3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagemaker_serving.launcher.universal_code import UniversalCodeError, download_universal_code

BUCKET = "universal-code"


@pytest.fixture
def s3(s3_url: str, monkeypatch):
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_url,
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def test_every_file_under_the_prefix_keeps_its_path(s3, tmp_path: Path):
    s3.put_object(Bucket=BUCKET, Key="shared/code/inference.py", Body=b"# handlers\n")
    s3.put_object(Bucket=BUCKET, Key="shared/code/lib/util.py", Body=b"X = 1\n")
    s3.put_object(Bucket=BUCKET, Key="shared/code/lib/", Body=b"")  # a folder marker
    s3.put_object(Bucket=BUCKET, Key="shared/other.py", Body=b"")  # beside the prefix
    dest = download_universal_code(BUCKET, "/shared/code/", tmp_path / "code")
    assert dest == tmp_path / "code"
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["inference.py", "lib/util.py"]
    assert (dest / "inference.py").read_bytes() == b"# handlers\n"


def test_an_empty_prefix_is_an_error(s3, tmp_path: Path):
    with pytest.raises(UniversalCodeError, match="holds no files"):
        download_universal_code(BUCKET, "nothing/here", tmp_path / "code")


def test_a_key_that_leaves_the_prefix_is_refused(s3, tmp_path: Path):
    s3.put_object(Bucket=BUCKET, Key="code/../escape.py", Body=b"")
    with pytest.raises(UniversalCodeError, match="leaves the prefix"):
        download_universal_code(BUCKET, "code", tmp_path / "code")
    assert not (tmp_path / "escape.py").exists()


def test_a_missing_bucket_is_an_error_naming_it(s3, tmp_path: Path):
    with pytest.raises(UniversalCodeError, match="s3://no-such-bucket/code/"):
        download_universal_code("no-such-bucket", "code", tmp_path / "code")
