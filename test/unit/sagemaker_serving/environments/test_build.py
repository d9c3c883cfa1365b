"""A code/ directory made ready: requirements into an environment of its own over the
container's visible packages, and the choice of process (environments/build.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import make_wheel, tiny_wheel
from sagemaker_serving.environments import build
from sagemaker_serving.user_code.loading import UserCodeError, UserCodeTimeout

FAKE_REQUESTS = {"requests/__init__.py": '__version__ = "99.0.0"\n'}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return build.container_site(tmp_path_factory.mktemp("container") / "site")


@pytest.fixture
def code(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # wheels from code/wheelhouse only
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "inference.py").write_text("def handler(data, context): return 'x'\n")
    return directory


def prepare(code, site, tmp_path, shared_process=False, timeout=120.0) -> build.Environment:
    return build.prepare(code, tmp_path / "env", site, timeout, shared_process)


def run(python: str, script: str) -> str:
    return subprocess.run(
        [python, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_code_that_brings_nothing_runs_in_the_service(code, site, tmp_path):
    environment = prepare(code, site, tmp_path)
    assert environment.python is None and environment.paths == (str(code),)
    assert not (tmp_path / "env").exists()


def test_new_packages_install_into_an_environment_the_service_can_import(code, site, tmp_path):
    tiny_wheel(code / "wheelhouse")
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    environment = prepare(code, site, tmp_path)
    assert environment.python is None
    installed = environment.paths[0]
    assert installed.endswith("site-packages") and str(tmp_path / "env") in installed
    assert environment.paths[-1] == str(code)


def test_a_pin_of_a_package_the_service_uses_gets_processes_of_its_own(code, site, tmp_path):
    make_wheel(code / "wheelhouse", "requests", "99.0.0", FAKE_REQUESTS)
    (code / "requirements.txt").write_text("requests==99.0.0\n")
    environment = prepare(code, site, tmp_path)
    assert environment.reason == "it brings its own requests"
    assert environment.python is not None
    seen = run(
        environment.python,
        "import requests, numpy, sagemaker_serving, sys; "
        "print(requests.__version__, numpy.__file__, 'tensorflow' in sys.modules)",
    )
    version, numpy_file, _ = seen.split()
    assert version == "99.0.0" and str(site) in numpy_file  # pip left the rest to the container
    hidden = subprocess.run(
        [environment.python, "-c", "import tensorflow"], capture_output=True, text=True
    )
    assert hidden.returncode != 0 and "No module named 'tensorflow'" in hidden.stderr


def test_a_lib_that_shadows_the_service_gets_processes_of_its_own(code, site, tmp_path):
    (code / "lib" / "numpy").mkdir(parents=True)
    (code / "lib" / "numpy" / "__init__.py").write_text("__version__ = 'mine'\n")
    (code / "requirements.txt").write_text("no-such-package-anywhere==1.0\n")  # not installed
    environment = prepare(code, site, tmp_path)
    assert "numpy" in environment.reason
    assert environment.paths == (str(code / "lib"), str(code))
    assert environment.python is not None
    first = f"import sys; sys.path[:0] = {list(environment.paths)!r}; "  # as the host does
    assert run(environment.python, first + "import numpy; print(numpy.__version__)") == "mine"


def test_requirements_beside_lib_are_not_installed(code, site, tmp_path, caplog):
    (code / "lib").mkdir()
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    with caplog.at_level(logging.INFO):
        environment = prepare(code, site, tmp_path)
    assert environment.paths == (str(code / "lib"), str(code))
    assert "is not installed" in caplog.text


def test_on_a_multi_model_endpoint_anything_beside_inference_py_gets_its_own(code, site, tmp_path):
    assert prepare(code, site, tmp_path, shared_process=True).python is None
    (code / "helper.py").write_text("X = 1\n")
    environment = prepare(code, site, tmp_path, shared_process=True)
    assert environment.python is not None
    assert environment.reason == "a multi-model model with packages of its own"


def test_a_hidden_container_package_asked_for_is_used_as_installed(code, site, tmp_path, caplog):
    (code / "requirements.txt").write_text("pillow\n")  # no index, no wheelhouse: none needed
    with caplog.at_level(logging.INFO):
        environment = prepare(code, site, tmp_path)
    assert environment.python is None
    assert "the container's pillow used as installed" in caplog.text
    linked = environment.paths[1]
    assert (tmp_path / "env" / "linked" / "PIL").is_symlink() and linked.endswith("linked")


def test_a_failed_or_slow_install_says_why(code, site, tmp_path):
    (code / "requirements.txt").write_text("no-such-package-anywhere==1.0\n")
    with pytest.raises(UserCodeError) as info:
        prepare(code, site, tmp_path)
    message = str(info.value)
    assert message.startswith("pip install -r code/requirements.txt failed:\nERROR:")
    assert "no-such-package-anywhere" in message
    with pytest.raises(UserCodeTimeout):
        prepare(code, site, tmp_path, timeout=0.001)


def test_a_wheelhouse_installs_without_any_index(code, site, tmp_path, monkeypatch):
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing answers there
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    tiny_wheel(code / "wheelhouse")
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    environment = prepare(code, site, tmp_path, timeout=60)
    assert "tinypkg" in {p.name for p in Path(environment.paths[0]).iterdir()}
    (code / "requirements.txt").write_text("tinypkg==1.0\nnot-in-the-wheelhouse==1.0\n")
    with pytest.raises(UserCodeError, match="No matching distribution found for not-in-the"):
        prepare(code, site, tmp_path, timeout=60)


def test_pips_message_names_the_models_files_relative_and_no_internal_folder(code, site, tmp_path):
    """A wheel that would write outside the environment (`../`), a link in the wheelhouse
    that leads nowhere or loops: pip's words, with model-relative paths and no folder of the
    run directory (the environment, its venv)."""
    make_wheel(code / "wheelhouse", "evil", "1.0", {"../../../../evil.py": "X = 1\n"})
    (code / "wheelhouse" / "gone-1.0-py3-none-any.whl").symlink_to("nowhere.whl")
    (code / "wheelhouse" / "loop-1.0-py3-none-any.whl").symlink_to("loop-1.0-py3-none-any.whl")
    assert build.environment_key(code)  # the links are no error of the key's
    said = {}
    for package in ("evil", "gone", "loop"):
        (code / "requirements.txt").write_text(f"{package}==1.0\n")
        with pytest.raises(UserCodeError) as info:
            prepare(code, site, tmp_path)
        said[package] = str(info.value)
        assert str(tmp_path) not in said[package], said[package]
    assert "The wheel 'code/wheelhouse/evil-1.0-py3-none-any.whl' has a file " in said["evil"]
    assert "outside the target directory 'site-packages'" in said["evil"]
    assert "No such file or directory: 'code/wheelhouse/gone-1.0-py3-none-any.whl'" in said["gone"]
    assert "symbolic links: 'code/wheelhouse/loop-1.0-py3-none-any.whl'" in said["loop"]


def test_pip_past_its_time_is_killed_with_what_it_started(tmp_path):
    marker = f"sleep-marker-{tmp_path.name}"
    grandchild = f"import time; time.sleep(60)  # {marker}"
    command = [
        sys.executable,
        "-c",
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]);"
        " time.sleep(60)",
    ]
    assert build.run_in_group(command, tmp_path, 1.0) is None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        marker in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
    ):
        time.sleep(0.1)
    left = [
        p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
    ]
    assert not [p for p in left if p.status() != psutil.STATUS_ZOMBIE]


def test_the_site_folder_is_made_again_when_the_container_changed(tmp_path, monkeypatch):
    site = build.container_site(tmp_path / "site")
    (site / "stale").write_text("")
    assert (build.container_site(site) / "stale").exists()  # the same container: kept
    monkeypatch.setattr(build.visible, "fingerprint", lambda: "after an upgrade")
    assert not (build.container_site(site) / "stale").exists()
    assert (site / "numpy").is_symlink()


def test_folders_of_data_beside_inference_py_are_no_modules(code, site, tmp_path):
    (code / "assets").mkdir()
    (code / "assets" / "labels.txt").write_text("cat\ndog\n")
    assert prepare(code, site, tmp_path, shared_process=True).python is None


def test_an_import_check_ends_with_the_worker_that_started_it(tmp_path):
    """A gunicorn worker killed during a multi-model load: its import of a hanging
    inference.py (in a session of its own) must not run on for as long as the code hangs."""
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "inference.py").write_text("import time\ntime.sleep(600)\n")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from sagemaker_serving.environments import"
            " build; build.check_import(Path(sys.argv[1]), 'inference_x', [], 600)",
            str(code_dir),
        ]
    )

    def checks() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            if str(code_dir) in " ".join(p.info["cmdline"] or []) and p.pid != worker.pid:
                found.append(p)
        return [p for p in found if p.status() != psutil.STATUS_ZOMBIE]

    try:
        deadline = time.monotonic() + 30
        while not checks() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checks(), "the import check did not start"
        time.sleep(0.5)  # importing: the worker waits on it
        worker.kill()
        worker.wait(10)
        deadline = time.monotonic() + 10
        while checks() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = checks()
    finally:
        worker.kill()
        for p in checks():
            p.kill()
    assert not left


def test_an_import_that_crashes_the_interpreter_says_how_it_ended(tmp_path):
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "inference.py").write_text("import ctypes\nctypes.string_at(0)\n")
    with pytest.raises(build.UserCodeError) as caught:
        build.check_import(code_dir, "inference_crash", [], 60)
    assert "failed: it was killed by SIGSEGV" in str(caught.value), caught.value
