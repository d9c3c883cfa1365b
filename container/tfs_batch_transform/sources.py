"""Where inputs are read and outputs written: a local path or `s3://bucket/prefix` (boto3).

Inputs are listed as S3 lists a prefix: every object (file) under it, in key order, each named
by its key relative to the prefix (a POSIX path for local files; sorted by that string, which
is UTF-8 byte order like S3's). Outputs are `<output>/<relative key>.out`, written whole and
atomically (a local temporary file renamed into place; one S3 PUT or multipart upload), so an
output that exists is complete.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

OUTPUT_SUFFIX = ".out"
TEMP_SUFFIX = ".tbt-partial"  # local temporary outputs; removed at the start of every job


@dataclass(frozen=True)
class InputObject:
    """One input object: its key relative to the input prefix, and its size in bytes."""

    key: str
    size: int


class InputStore(Protocol):
    def list(self) -> list[InputObject]: ...
    def read(self, key: str) -> bytes: ...


class OutputStore(Protocol):
    def existing(self) -> set[str]: ...
    def write(self, key: str, data: bytes) -> None: ...
    def delete(self, key: str) -> None: ...
    def cleanup(self) -> None: ...
    def location(self, key: str) -> str: ...


def is_s3(url: str) -> bool:
    return url.startswith("s3://")


def split_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`."""
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"{url!r}: no bucket name")
    return bucket, prefix


def open_input(url: str, s3_endpoint_url: str | None = None) -> InputStore:
    if is_s3(url):
        return S3Input(*split_s3_url(url), s3_client(s3_endpoint_url))
    return LocalInput(Path(url))


def open_output(url: str, s3_endpoint_url: str | None = None) -> OutputStore:
    if is_s3(url):
        return S3Output(*split_s3_url(url), s3_client(s3_endpoint_url))
    return LocalOutput(Path(url))


def s3_client(endpoint_url: str | None) -> Any:
    """A boto3 S3 client; `endpoint_url` (else AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3, which
    boto3 reads itself) points it at an S3-compatible server."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint_url or None)


# ----------------------------------------------------------------------------- local


class LocalInput:
    """A file (one object named by its file name) or a directory, recursively."""

    def __init__(self, path: Path):
        self.path = path
        if not path.exists():
            raise FileNotFoundError(f"input {path} does not exist")

    def list(self) -> list[InputObject]:
        if self.path.is_file():
            return [InputObject(self.path.name, self.path.stat().st_size)]
        found = []
        for root, _dirs, files in os.walk(self.path, followlinks=True):
            for name in files:
                full = Path(root) / name
                if full.is_file():
                    key = full.relative_to(self.path).as_posix()
                    found.append(InputObject(key, full.stat().st_size))
        return sorted(found, key=lambda obj: obj.key)

    def read(self, key: str) -> bytes:
        return (self.path if self.path.is_file() else self.path / key).read_bytes()


class LocalOutput:
    def __init__(self, path: Path):
        self.path = path
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"output {path} is not a directory")
        path.mkdir(parents=True, exist_ok=True)
        # outputs get the mode any new file gets (0666 less the umask), as `>` would give
        # them; read once, before the job's threads start (reading it means setting it)
        umask = os.umask(0o077)
        os.umask(umask)
        self.mode = 0o666 & ~umask

    def existing(self) -> set[str]:
        return {
            p.relative_to(self.path).as_posix()
            for p in self.path.rglob(f"*{OUTPUT_SUFFIX}")
            if p.is_file()
        }

    def write(self, key: str, data: bytes) -> None:
        target = self.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent
        )
        try:
            os.fchmod(fd, self.mode)  # mkstemp's file is 0600
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def delete(self, key: str) -> None:
        (self.path / key).unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Remove temporary outputs left by a job that was killed."""
        for partial in self.path.rglob(f".*{TEMP_SUFFIX}"):
            partial.unlink(missing_ok=True)

    def location(self, key: str) -> str:
        return str(self.path / key)


# -------------------------------------------------------------------------------- S3


def _join_key(prefix: str, key: str) -> str:
    if not prefix or prefix.endswith("/"):
        return prefix + key
    return f"{prefix}/{key}"


class S3Input:
    """Every object whose key starts with the prefix, except folder markers (keys ending in
    `/`). Relative key: the key after the prefix, without a leading `/`; an object whose key
    is the prefix itself is named by its last path segment."""

    def __init__(self, bucket: str, prefix: str, client: Any):
        self.bucket, self.prefix, self.client = bucket, prefix, client
        self._keys: dict[str, str] = {}

    def list(self) -> list[InputObject]:
        found = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith("/"):
                    continue
                relative = key[len(self.prefix) :].lstrip("/") or key.rsplit("/", 1)[-1]
                self._keys[relative] = key
                found.append(InputObject(relative, int(obj["Size"])))
        return sorted(found, key=lambda obj: obj.key)

    def read(self, key: str) -> bytes:
        full = self._keys.get(key) or _join_key(self.prefix, key)
        return self.client.get_object(Bucket=self.bucket, Key=full)["Body"].read()


class S3Output:
    def __init__(self, bucket: str, prefix: str, client: Any):
        self.bucket, self.prefix, self.client = bucket, prefix, client

    def existing(self) -> set[str]:
        found = set()
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
            for obj in page.get("Contents", []):
                relative = obj["Key"][len(self.prefix) :].lstrip("/")
                if relative.endswith(OUTPUT_SUFFIX):
                    found.add(relative)
        return found

    def write(self, key: str, data: bytes) -> None:
        # upload_fileobj: one PUT, or a multipart upload for large outputs; either way the
        # object appears only when complete (a failed multipart upload is aborted).
        self.client.upload_fileobj(io.BytesIO(data), self.bucket, _join_key(self.prefix, key))

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=_join_key(self.prefix, key))

    def cleanup(self) -> None:
        """Nothing to do: S3 never shows a partial object."""

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{_join_key(self.prefix, key)}"
