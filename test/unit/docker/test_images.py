"""The Docker images, scripts and buildspec, checked by every means that runs without an engine:
hadolint, a parse of the Dockerfiles, bash -n and shellcheck, the buildspec (nginx -t on the
rendered config: test/unit/sagemaker_serving/launcher/test_nginx_config.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
DOCKERFILE = REPO / "docker" / "Dockerfile"
SCRIPTS = sorted((REPO / "scripts").glob("*.sh"))
SHELL_FILES = [*SCRIPTS, REPO / "docker" / "finish_image.sh", REPO / ".ci" / "run"]
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


# ----- docker/Dockerfile ----------------------------------------------------------------------

TARGETS = {"cpu": "tensorflow_model_server", "gpu": "tensorflow_model_server",
           "tfs-model-server": "tfs-model-server"}  # fmt: skip
Step = tuple[str, str]


def instructions(dockerfile: Path = DOCKERFILE) -> list[Step]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[Step] = []
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


def stages() -> dict[str, list[Step]]:
    """Each named stage: its FROM first, then its instructions."""
    found: dict[str, list[Step]] = {}
    current: list[Step] | None = None
    for keyword, args in instructions():
        if keyword == "FROM":
            words = args.split()
            assert len(words) == 3 and words[1].upper() == "AS", f"unnamed stage: FROM {args}"
            current = found.setdefault(words[2], [])
        if current is not None:
            current.append((keyword, args))
    return found


def chain(target: str) -> list[Step]:
    """Every instruction that makes `target`: its parent stages' first (FROM a stage name)."""
    all_stages = stages()
    parent = all_stages[target][0][1].split()[0]
    inherited = chain(parent) if parent in all_stages else []
    return inherited + all_stages[target]


def arg_default(name: str) -> str:
    for keyword, args in instructions():
        if keyword == "ARG" and args.startswith(f"{name}="):
            return args.split("=", 1)[1]
    raise AssertionError(f"docker/Dockerfile: no ARG {name}=...")


def apt_installs(steps: list[Step]) -> list[str]:
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    return [
        word.strip('"')
        for line in re.findall(r"apt-get install [^&]*", runs)
        for word in line.split()[2:]
        if not word.startswith("-")
    ]


def test_one_dockerfile_for_every_image():
    assert sorted(p.name for p in (REPO / "docker").glob("Dockerfile*")) == ["Dockerfile"]
    assert set(TARGETS) <= set(stages())


def test_hadolint_reports_nothing():
    result = subprocess.run(
        [tool("hadolint"), "--no-color", str(DOCKERFILE)],
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


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_shares_the_common_layers(target):
    """The runtime's packages and user, then the dependencies' venv: one set of layers, so the
    GPU image shares every layer but its own CUDA and model-server ones with the CPU image."""
    assert stages()[target][0] == ("FROM", f"common AS {target}")
    assert stages()["common"][0] == ("FROM", "runtime AS common")
    assert stages()["common"][1:] == [("COPY", "--from=python-build /opt/venv /opt/venv")]


@pytest.mark.parametrize("target", TARGETS)
def test_target_labels_port_user_and_entry_point(target):
    steps = chain(target)
    labels = " ".join(args for keyword, args in steps if keyword == "LABEL")
    for label in LABELS:
        assert label in labels.split(), f"{target}: missing LABEL {label}"
    assert f"com.amazonaws.sagemaker.tfs.model-server={TARGETS[target]}" in labels.split()
    assert ("EXPOSE", "8080") in steps
    # `docker run IMAGE serve` runs serve itself (exec form, no shell, no ENTRYPOINT wrapper)
    assert not [args for keyword, args in steps if keyword == "ENTRYPOINT"]
    cmds = [args for keyword, args in steps if keyword == "CMD"]
    assert cmds and json.loads(cmds[-1]) == ["serve"], cmds
    assert steps[-1] == ("USER", "1000:1000"), f"{target}: the last step must drop root"
    env = " ".join(args for keyword, args in steps if keyword == "ENV")
    assert "PATH=/opt/venv/bin:" in env and "TMPDIR=/tmp" in env
    finish = [args for keyword, args in steps if keyword == "RUN" and "finish_image.sh" in args]
    assert finish == [
        f"bash /tmp/dist/finish_image.sh {TARGETS[target]} /tmp/dist && rm -rf /tmp/dist"
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_target_has_nginx_njs_and_no_build_tools(target):
    packages = {word.split("=")[0] for word in apt_installs(chain(target))}
    assert {
        "nginx",
        "libnginx-mod-http-js",
        "libnginx-mod-http-headers-more-filter",
        "python3",
        "ca-certificates",
    } <= packages
    assert not packages & set(BUILD_TOOLS), packages & set(BUILD_TOOLS)


def test_no_unverified_downloads():
    text = " ".join(args for _, args in instructions())
    assert not re.search(r"\b(curl|wget)\b", text)
    assert not any(keyword == "ADD" for keyword, _ in instructions())


def test_pip_gets_its_settings_as_build_secrets_only():
    """The CA bundle and pip.conf are mounted for the RUN steps that run pip, never copied."""
    for keyword, args in instructions():
        if keyword == "COPY":
            assert "pip.conf" not in args and ".crt" not in args, args
        if (
            keyword == "RUN"
            and re.search(r"pip (install|wheel)", args)
            and "--no-index" not in args
        ):
            if "finish_image.sh" in args:
                continue
            assert "--mount=type=secret,id=pip.conf,target=/etc/pip.conf" in args, args
            assert "--mount=type=secret,id=ca.crt,target=/run/secrets/ca.crt" in args, args


@pytest.mark.parametrize(("target", "stage"), [("cpu", "tfs"), ("gpu", "tfs-gpu")])
def test_tf_serving_targets_copy_the_real_model_server(target, stage):
    """cpu and gpu copy tensorflow_model_server from tensorflow/serving at the pinned version."""
    suffix = "-gpu" if target == "gpu" else ""
    image_arg = "TFS_GPU_IMAGE" if target == "gpu" else "TFS_IMAGE"
    assert arg_default(image_arg) == f"tensorflow/serving:${{TFS_VERSION}}{suffix}"
    assert stages()[stage][0] == ("FROM", f"${{{image_arg}}} AS {stage}")
    copies = [args for keyword, args in stages()[target] if keyword == "COPY"]
    assert (
        f"--from={stage} /usr/bin/tensorflow_model_server /usr/bin/tensorflow_model_server"
        in copies
    )
    assert "--from=loopback /src/loopback_guard.so /opt/venv/lib/loopback_guard.so" in copies
    # the venv every target copies: no TensorFlow, tensorflow-serving-api without its deps
    runs = " ".join(args for keyword, args in stages()["python-build"] if keyword == "RUN")
    assert "--exclude tensorflow --exclude tensorflow-serving-api" in runs
    assert "--no-deps -r requirements/serving-api.txt" in runs
    assert "requirements/tensorflow.txt" not in " ".join(
        args for keyword, args in stages()[target] if keyword == "RUN"
    )


def test_tfs_model_server_target_installs_tensorflow_at_the_pin_without_its_headers():
    runs = " ".join(args for keyword, args in stages()["tfs-model-server"] if keyword == "RUN")
    assert "-c /tmp/requirements/constraints.txt -r /tmp/requirements/tensorflow.txt" in runs
    assert "site-packages/tensorflow/include" in runs


def test_tf_serving_version_matches_the_setup_py_pin():
    requirements = load_script("image_requirements")
    (pin,) = requirements.select(
        requirements.install_requires(REPO / "setup.py"), only=["tensorflow-serving-api"]
    )
    assert arg_default("TFS_VERSION") == pin.split("==")[1]


DEBIAN_VERSION_ARGS = (
    "PYTHON_VERSION",
    "NGINX_VERSION",
    "NJS_VERSION",
    "HEADERS_MORE_VERSION",
    "CA_CERTIFICATES_VERSION",
    "GCC_VERSION",
    "GLIBC_VERSION",
)


@pytest.mark.parametrize("name", DEBIAN_VERSION_ARGS)
def test_debian_pins_are_upstream_versions_that_survive_a_point_release(name):
    """No Debian revision (`-9+deb12u11`): a point release replaces the revision and the
    mirrors drop the old one; the upstream version stays for the whole release."""
    value = arg_default(name)
    assert re.fullmatch(r"(\d+:)?[0-9][0-9.]*", value), f"{name}={value}"


def test_every_apt_package_is_pinned_to_an_upstream_version_arg():
    installs = apt_installs(instructions())
    assert installs
    for word in installs:
        name, sep, version = word.partition("=")
        assert sep, f"{name} is not pinned"
        assert re.fullmatch(r"\$\{[A-Z_]+_VERSION\}-?\*", version), word


@pytest.mark.parametrize(
    ("package", "arg"),
    [("nginx", "NGINX_VERSION"), ("libnginx-mod-http-js", "NJS_VERSION"),
     ("python3", "PYTHON_VERSION"), ("libc6-dev", "GLIBC_VERSION")],
)  # fmt: skip
def test_pins_match_what_debian_ships_now(package, arg):
    """This machine's apt (Debian bookworm, as the images) offers a version the pin accepts."""
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache: not a Debian machine")
    policy = subprocess.run(
        ["apt-cache", "policy", package], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r"Candidate: (\S+)", policy)
    if match is None or match.group(1) == "(none)":
        pytest.skip(f"apt knows no {package} here (apt-get update first)")
    assert match.group(1).startswith(arg_default(arg) + "-"), (package, match.group(1))


def test_the_source_root_is_named_once():
    """SRC_DIR and NGINX_DIR are setup.py's package_dir roots: moving them changes two lines."""
    setup = (REPO / "setup.py").read_text()
    root, nginx = arg_default("SRC_DIR"), arg_default("NGINX_DIR")
    assert f'package_dir={{"": "{root}", "sagemaker_serving.nginx": "{nginx}"}}' in setup
    copies = [args for keyword, args in instructions() if keyword == "COPY"]
    assert "${SRC_DIR}/ ${SRC_DIR}/" in copies and "${NGINX_DIR}/ ${NGINX_DIR}/" in copies
    assert not [c for c in copies if re.search(r"(^|\s)(container|nginx)/", c)], copies


def test_copied_sources_exist_and_are_not_dockerignored():
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for keyword, args in instructions():
        if keyword != "COPY" or args.startswith("--from"):
            continue
        for source in args.split()[:-1]:
            source = source.replace("${SRC_DIR}", arg_default("SRC_DIR"))
            source = source.replace("${NGINX_DIR}", arg_default("NGINX_DIR"))
            assert (REPO / source).exists(), source
            assert source.split("/")[0] not in ignored, source


def test_podman_settings_file():
    """The two settings podman needs on machines like CI's, in the project (not /etc)."""
    import tomllib

    conf = tomllib.loads((REPO / "docker" / "engine" / "containers.conf").read_text())
    assert conf["engine"]["runtime"] == "runc"
    limits = dict(item.split("=") for item in conf["containers"]["default_ulimits"])
    assert set(limits) == {"nofile", "nproc"}


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
    assert {
        "build.sh",
        "publish.sh",
        "start.sh",
        "stop.sh",
        "curl.sh",
        "engine.sh",
        "debian_base.sh",
    } <= names


@pytest.mark.parametrize("script", SHELL_FILES, ids=lambda p: p.name)
def test_script_parses_is_strict_and_executable(script):
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    assert "set -euo pipefail" in script.read_text()
    assert os.access(script, os.X_OK)


def test_shellcheck_reports_nothing():
    result = subprocess.run(
        [tool("shellcheck"), *map(str, SHELL_FILES)],
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


FAKE_ENGINE = """#!/bin/sh
# a stand-in engine: records its command lines and the secrets it is handed
echo "$@" >> {log}
case "$1" in
  image|pull) exit {has_images} ;;
esac
for word in "$@"; do
  case "$word" in
    id=*,src=*) name="${{word%%,*}}"; cp "${{word#*,src=}}" "{dir}/secret-${{name#id=}}" ;;
  esac
done
"""


def run_build(tmp_path: Path, *variants: str, has_images: bool = False, **env: str):
    """build.sh against a stand-in engine: (its command lines, build.sh's stdout lines)."""
    log = tmp_path / "engine.log"
    fake = tmp_path / "engine"
    fake.write_text(FAKE_ENGINE.format(log=log, dir=tmp_path, has_images=0 if has_images else 1))
    fake.chmod(0o755)
    result = subprocess.run(
        [str(REPO / "scripts" / "build.sh"), *variants],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "DOCKER": str(fake),
            "IMAGE_REPO": "repo",
            "DEBIAN_IMAGE": "example/debian:base",
            **env,
        },
    )
    builds = [line for line in log.read_text().splitlines() if line.startswith("build ")]
    return builds, result.stdout.splitlines()


@pytest.mark.parametrize(
    ("variant", "has_tfs", "target", "platform"),
    [
        ("cpu", True, "cpu", "amd64"),
        ("cpu", False, "tfs-model-server", "amd64"),
        ("gpu", True, "gpu", "amd64"),
        ("arm64", True, "tfs-model-server", "arm64"),
    ],
)
def test_build_picks_the_target_and_prints_the_reference_last(
    tmp_path, variant, has_tfs, target, platform
):
    """cpu runs the real model server where tensorflow/serving can be had, else ours."""
    (line,), stdout = run_build(tmp_path, variant, has_images=has_tfs)
    version = setup_version()
    assert stdout[-1] == f"repo:{version}-{variant}"
    assert f"--target {target} " in line
    assert f"--platform linux/{platform}" in line
    assert f"--file {REPO}/docker/Dockerfile " in line
    assert f"--tag repo:{version}-{variant}" in line
    assert "--build-arg TFS_VERSION=2.21.0" in line
    assert "--build-arg TFS_IMAGE=docker.io/tensorflow/serving:2.21.0 " in line
    assert "--build-arg DEBIAN_IMAGE=example/debian:base" in line
    assert line.split()[-1] == str(REPO)


def test_build_model_server_can_be_chosen(tmp_path):
    (line,), _ = run_build(tmp_path, "cpu", has_images=True, MODEL_SERVER="tfs-model-server")
    assert "--target tfs-model-server " in line


def test_build_hands_pip_its_ca_and_index_as_secrets(tmp_path):
    ca = tmp_path / "corporate-ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nexample\n-----END CERTIFICATE-----\n")
    (line,), _ = run_build(
        tmp_path,
        "cpu",
        CA_BUNDLE=str(ca),
        PIP_INDEX_URL="https://pypi.example.com/simple",
        PIP_EXTRA_INDEX_URL="file:///opt/local/simple https://extra.example.com/simple",
        PIP_TRUSTED_HOST="",
    )
    assert "--secret id=pip.conf,src=" in line and "--secret id=ca.crt,src=" in line
    assert (tmp_path / "secret-ca.crt").read_text() == ca.read_text()
    conf = (tmp_path / "secret-pip.conf").read_text().splitlines()
    assert conf[0] == "[global]"
    assert "cert = /run/secrets/ca.crt" in conf
    assert "index-url = https://pypi.example.com/simple" in conf
    # a local path does not exist inside the build: only http(s) indexes are passed on
    assert "extra-index-url = https://extra.example.com/simple" in conf
    # the temporary copies are gone once the build is over
    src = re.search(r"id=ca\.crt,src=(\S+)", line)
    assert src and not Path(src.group(1)).exists()


def test_build_podman_keeps_the_docker_format(tmp_path):
    """podman's default OCI format drops SHELL (and with it pipefail)."""
    podman = tmp_path / "bin" / "podman"
    podman.parent.mkdir()
    (line,), _ = run_build(tmp_path, "cpu")
    assert "--format docker" not in line
    podman.write_text(f'#!/bin/sh\nexec {tmp_path / "engine"} "$@"\n')
    podman.chmod(0o755)
    (tmp_path / "engine.log").unlink()
    (line,), _ = run_build(
        tmp_path, "cpu", DOCKER="podman", PATH=f"{podman.parent}:{os.environ['PATH']}"
    )
    assert "--format docker" in line


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
        "test/image",
        "--image",
        "scripts/publish.sh",
    ):
        assert needed in text, needed


def test_buildspec_commands_parse_as_bash(tmp_path):
    script = tmp_path / "buildspec.sh"
    script.write_text("\n".join(buildspec_commands()) + "\n")
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)


def test_buildspec_hadolints_the_dockerfile_and_shellchecks_the_scripts():
    text = "\n".join(buildspec_commands())
    assert "hadolint docker/Dockerfile" in text
    assert "shellcheck scripts/*.sh docker/finish_image.sh" in text


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


# ----- debian_base.sh and engine.sh ------------------------------------------------------------


def run_script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO / "scripts" / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


def test_debian_base_prefers_the_official_image_when_the_engine_has_it(tmp_path):
    engine = tmp_path / "engine"
    engine.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "log"}\n')  # every image is there
    engine.chmod(0o755)
    result = run_script("debian_base.sh", ENGINE=str(engine), DEBIAN_IMAGE="")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "docker.io/library/debian:bookworm-slim"
    given = run_script("debian_base.sh", ENGINE=str(engine), DEBIAN_IMAGE="example/base:1")
    assert given.stdout.splitlines()[-1] == "example/base:1"


def test_debian_base_reuses_a_young_mmdebstrap_base(tmp_path):
    """Without the official image: the local base while younger than BASE_MAX_AGE_DAYS."""
    created = time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(time.time() - 3600))
    engine = tmp_path / "engine"
    engine.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        "  *docker.io/library/debian*) exit 1 ;;\n"
        f"  *--format*) echo '{created}' ;;\n"
        "esac\n"
    )
    engine.chmod(0o755)
    result = run_script("debian_base.sh", ENGINE=str(engine), DEBIAN_IMAGE="")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "localhost/sagemaker-tfs-base:bookworm"
    assert "cannot be pulled" in result.stderr


def test_engine_rejects_an_unknown_engine():
    result = run_script("engine.sh", "env", ENGINE="lxc")
    assert result.returncode == 2 and "docker or podman" in result.stderr
