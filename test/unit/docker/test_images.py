"""The Docker images, scripts and buildspec, checked by every means that runs without an engine:
hadolint, a parse of the Dockerfiles, bash -n and shellcheck, the buildspec (nginx -t on the
rendered config: test/unit/sagemaker_serving/frontdoor/test_nginx_config.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
DOCKERFILES = sorted((REPO / "docker").glob("Dockerfile.*"))
SCRIPTS = sorted((REPO / "scripts").glob("*.sh"))
VARIANTS = ("cpu", "gpu", "arm64")
LABELS = (
    "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true",
    "com.amazonaws.sagemaker.capabilities.multi-models=true",
)
BUILD_TOOLS = ("build-essential", "gcc", "g++", "make", "python3-dev", "clang", "cmake")


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool(name: str) -> str:
    """A dev tool from the venv (or PATH); the test fails when it is missing."""
    path = VENV_BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: `make install` installs it (setup.py DEV_REQUIRES)")
    return found


def setup_version() -> str:
    match = re.search(r'^\s*version="([^"]+)"', (REPO / "setup.py").read_text(), re.M)
    assert match
    return match.group(1)


# ----- Dockerfiles ---------------------------------------------------------------------------


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, args = text.partition(" ")
        result.append((keyword.upper(), args.strip()))
    assert not pending, f"{dockerfile}: dangling continuation"
    return result


def final_stage(dockerfile: Path) -> list[tuple[str, str]]:
    steps = instructions(dockerfile)
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def arg_default(dockerfile: Path, name: str) -> str:
    for keyword, args in instructions(dockerfile):
        if keyword == "ARG" and args.startswith(f"{name}="):
            return args.split("=", 1)[1]
    raise AssertionError(f"{dockerfile}: no ARG {name}=...")


def test_every_variant_has_a_dockerfile():
    assert [p.name for p in DOCKERFILES] == sorted(f"Dockerfile.{v}" for v in VARIANTS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_reports_nothing(dockerfile):
    result = subprocess.run(
        [tool("hadolint"), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_hadolint_does_report_a_bad_dockerfile(tmp_path):
    """The check above can fail: unpinned packages, kept apt lists, root user."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run(
        [tool("hadolint"), "--no-color", str(bad)], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3008" in result.stdout, result.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_final_stage_labels_port_user_and_entry_point(dockerfile):
    stage = final_stage(dockerfile)
    labels = " ".join(args for keyword, args in stage if keyword == "LABEL")
    for label in LABELS:
        assert label in labels.split(), f"{dockerfile.name}: missing LABEL {label}"
    assert ("EXPOSE", "8080") in stage
    # `docker run IMAGE serve` runs serve itself (exec form, no shell, no ENTRYPOINT wrapper)
    assert not [args for keyword, args in stage if keyword == "ENTRYPOINT"]
    cmds = [args for keyword, args in stage if keyword == "CMD"]
    assert cmds and json.loads(cmds[-1]) == ["serve"], cmds
    users = [args for keyword, args in stage if keyword == "USER"]
    assert users, f"{dockerfile.name}: no USER"
    assert users[-1].split(":")[0] not in ("0", "root")
    env = " ".join(args for keyword, args in stage if keyword == "ENV")
    assert "PATH=/opt/venv/bin:" in env and "TMPDIR=/tmp" in env


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_final_stage_has_nginx_njs_and_no_build_tools(dockerfile):
    runs = " ".join(args for keyword, args in final_stage(dockerfile) if keyword == "RUN")
    installed = re.findall(r"apt-get install [^&]*", runs)
    assert installed, f"{dockerfile.name}: no apt-get install in the final stage"
    packages = {word.split("=")[0] for line in installed for word in line.split()[2:]}
    assert {
        "nginx",
        "libnginx-mod-http-js",
        "libnginx-mod-http-headers-more-filter",
        "python3",
    } <= packages
    assert not packages & set(BUILD_TOOLS), packages & set(BUILD_TOOLS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_no_unverified_downloads(dockerfile):
    text = " ".join(args for _, args in instructions(dockerfile))
    assert not re.search(r"\b(curl|wget)\b", text)
    assert not any(keyword == "ADD" for keyword, _ in instructions(dockerfile))


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_tf_serving_images_give_the_real_model_server(variant):
    """CPU and GPU copy tensorflow_model_server from tensorflow/serving at the pinned version."""
    dockerfile = REPO / "docker" / f"Dockerfile.{variant}"
    steps = instructions(dockerfile)
    suffix = "-gpu" if variant == "gpu" else ""
    assert arg_default(dockerfile, "TFS_IMAGE") == f"tensorflow/serving:${{TFS_VERSION}}{suffix}"
    assert ("FROM", "${TFS_IMAGE} AS tfs") in steps
    copies = [args for keyword, args in final_stage(dockerfile) if keyword == "COPY"]
    assert "--from=tfs /usr/bin/tensorflow_model_server /usr/bin/tensorflow_model_server" in copies
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    assert "--exclude tensorflow --exclude tensorflow-serving-api" in runs
    assert "--no-deps -r /tmp/serving-api.txt" in runs


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_tf_serving_version_matches_the_setup_py_pin(dockerfile):
    requirements = load_script("image_requirements")
    (pin,) = requirements.select(
        requirements.install_requires(REPO / "setup.py"), only=["tensorflow-serving-api"]
    )
    assert arg_default(dockerfile, "TFS_VERSION") == pin.split("==")[1]


def test_debian_package_pins_agree_across_dockerfiles():
    for name in ("PYTHON_DEB_VERSION", "NGINX_DEB_VERSION", "NJS_DEB_VERSION"):
        values = {arg_default(d, name) for d in DOCKERFILES}
        assert len(values) == 1, (name, values)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_copied_sources_exist_and_are_not_dockerignored(dockerfile):
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for keyword, args in instructions(dockerfile):
        if keyword != "COPY" or args.startswith("--from"):
            continue
        for source in args.split()[:-1]:
            assert (REPO / source).exists(), source
            assert source.split("/")[0] not in ignored, source


# ----- image_requirements.py -------------------------------------------------------------------


def test_image_requirements_without_tensorflow():
    requirements = load_script("image_requirements")
    pins = requirements.select(
        requirements.install_requires(REPO / "setup.py"),
        exclude=["tensorflow", "tensorflow_serving_api"],
    )
    names = {requirements.requirement_name(p) for p in pins}
    assert "tensorflow" not in names and "tensorflow-serving-api" not in names
    assert {"grpcio", "protobuf", "numpy", "falcon", "gunicorn"} <= names
    assert all("==" in p for p in pins)
    with pytest.raises(ValueError, match="not in INSTALL_REQUIRES"):
        requirements.select(pins, only=["tensorflow-cpu"])


def test_nvidia_pins_from_a_pip_report():
    requirements = load_script("image_requirements")
    report = {
        "install": [
            {"metadata": {"name": "nvidia_cudnn_cu12", "version": "9.3.0.75"}},
            {"metadata": {"name": "numpy", "version": "2.4.6"}},
            {"metadata": {"name": "nvidia-cublas-cu12", "version": "12.5.3.2"}},
        ]
    }
    assert requirements.nvidia_pins(report) == [
        "nvidia-cublas-cu12==12.5.3.2",
        "nvidia-cudnn-cu12==9.3.0.75",
    ]
    with pytest.raises(ValueError):
        requirements.nvidia_pins({"install": []})


# ----- scripts/*.sh ----------------------------------------------------------------------------


def test_every_script_is_there():
    names = {p.name for p in SCRIPTS}
    assert {"build.sh", "publish.sh", "start.sh", "stop.sh", "curl.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses_is_strict_and_executable(script):
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    assert "set -euo pipefail" in script.read_text()
    assert os.access(script, os.X_OK)


def test_shellcheck_reports_nothing():
    result = subprocess.run(
        [tool("shellcheck"), *map(str, SCRIPTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_tags_are_version_and_processor():
    result = subprocess.run(
        [str(REPO / "scripts" / "build.sh"), "--print-tags"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "IMAGE_REPO": "repo"},
    )
    version = setup_version()
    assert result.stdout.split() == [f"repo:{version}-{v}" for v in VARIANTS]


def test_build_runs_docker_build_per_variant(tmp_path):
    """A stand-in docker records the command lines build.sh runs."""
    log = tmp_path / "docker.log"
    fake = tmp_path / "docker"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    subprocess.run(
        [str(REPO / "scripts" / "build.sh"), "cpu", "arm64"],
        check=True,
        capture_output=True,
        env={**os.environ, "DOCKER": str(fake), "IMAGE_REPO": "repo"},
    )
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    version = setup_version()
    for line, variant, platform in zip(lines, ("cpu", "arm64"), ("amd64", "arm64"), strict=True):
        words = line.split()
        assert words[0] == "build"
        assert f"--platform linux/{platform}" in line
        assert f"--file {REPO}/docker/Dockerfile.{variant}" in line
        assert f"--tag repo:{version}-{variant}" in line
        assert "--build-arg TFS_VERSION=2.21.0" in line
        assert words[-1] == str(REPO)


def test_build_rejects_an_unknown_variant():
    result = subprocess.run(
        [str(REPO / "scripts" / "build.sh"), "--print-tags", "tpu"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and "tpu" in result.stderr


# ----- buildspec.yml ---------------------------------------------------------------------------


def buildspec() -> dict:
    import yaml  # pyyaml: a dev dependency (make install)

    return yaml.safe_load((REPO / "buildspec.yml").read_text())


def buildspec_commands() -> list[str]:
    return [
        command for phase in buildspec()["phases"].values() for command in phase.get("commands", [])
    ]


def test_buildspec_phases():
    spec = buildspec()
    assert str(spec["version"]) == "0.2"
    assert list(spec["phases"]) == ["install", "pre_build", "build", "post_build"]
    text = "\n".join(buildspec_commands())
    for needed in (
        "make install",
        "ruff check",
        "hadolint",
        "nginx_check.py",
        "test/unit",
        "scripts/build.sh",
        "--docker-image",
        "scripts/publish.sh",
    ):
        assert needed in text, needed


def test_buildspec_commands_parse_as_bash(tmp_path):
    script = tmp_path / "buildspec.sh"
    script.write_text("\n".join(buildspec_commands()) + "\n")
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)


def test_buildspec_hadolints_every_dockerfile():
    text = "\n".join(buildspec_commands())
    for dockerfile in DOCKERFILES:
        assert f"docker/{dockerfile.name}" in text, dockerfile.name


def test_everything_the_buildspec_calls_exists():
    text = "\n".join(buildspec_commands())
    paths = set(re.findall(r"(?<![\w/.])((?:scripts|test|docker)/[\w./-]+\w)", text))
    assert paths
    for path in paths:
        if "*" in path:
            continue
        target = REPO / path
        assert target.exists(), path
        if target.suffix == ".sh":
            subprocess.run(["bash", "-n", str(target)], check=True, timeout=30)
    for name in re.findall(r"\.venv/bin/([\w-]+)", text):
        tool(name)
