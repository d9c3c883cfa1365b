"""Minimal pure-Python wheels made at test time (so requirements tests need no network)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def tiny_wheel(directory: Path) -> None:
    """A minimal pure-Python wheel `tinypkg` 1.0 (so the test needs no network)."""
    make_wheel(directory, "tinypkg", "1.0", {"tinypkg/__init__.py": "VALUE = 42\n"})


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of `files` (path -> text) as distribution `name` `version`."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    path = directory / f"{name}-{version}-py3-none-any.whl"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{file},,\n" for file in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for file, text in files.items():
            wheel.writestr(file, text)
        wheel.writestr(f"{info}/RECORD", record)
    return path
