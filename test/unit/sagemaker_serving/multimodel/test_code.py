"""Each model's handlers: its own code/, else the universal code directory, else none; code
that brings packages of its own in an environment and handler processes of its own."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import tiny_wheel
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments import hidden as user_imports
from sagemaker_serving.environments import pool as handler_pool
from sagemaker_serving.environments.build import container_site
from sagemaker_serving.environments.hidden import HiddenPackages
from sagemaker_serving.multimodel.code import ModelCode
from sagemaker_serving.multimodel.environments import ModelEnvironments
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.registry import LoadedModel, Registry, internal_name
from sagemaker_serving.user_code.loading import Handlers


@pytest.fixture(autouse=True)
def undone_imports(monkeypatch):
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # wheels from code/wheelhouse only


# code/ beside inference.py: a file that gives the model an environment of its own, and
# requirements pip cannot install
OWN_ENVIRONMENT = {"helper.py": "X = 1\n"}
UNINSTALLABLE = {"requirements.txt": "no-such-package-anywhere==1.0\n"}


def loaded(
    tmp_path, name: str, code: str | None = None, files: dict[str, str] | None = None
) -> LoadedModel:
    """A model with code/inference.py `code` (none if None) and code/`files` beside it."""
    url = tmp_path / "models" / name
    (url / "1").mkdir(parents=True)
    if code is not None:
        (url / "code").mkdir()
        (url / "code" / "inference.py").write_text(code)
    for file, text in (files or {}).items():
        (url / "code").mkdir(exist_ok=True)
        (url / "code" / file).write_text(text)
    return LoadedModel(name, str(url), internal_name(name), str(url), (1,))


def refused(code: ModelCode, model: LoadedModel, seconds: float) -> MultiModelError:
    """The error with which code.prepare refuses `model` within `seconds`."""
    with pytest.raises(MultiModelError) as info:
        code.prepare(model, time.monotonic() + seconds)
    return info.value


def handled(handlers: Handlers) -> object:
    assert handlers.handler is not None
    return handlers.handler(None, None)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return container_site(tmp_path_factory.mktemp("container") / "site")


def model_code(tmp_path, site, universal_handlers=None, max_count=8) -> ModelCode:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    config = ServiceConfig("", "", [], [], 30.0, state_dir=str(state), load_timeout_seconds=30.0)
    environments = ModelEnvironments(
        replace(config, container_site=str(site), max_environments=max_count)
    )
    return ModelCode(universal_handlers, environments, Registry(state), 4)


def test_a_models_own_code_else_the_universal_code_else_none(tmp_path, site):
    own = loaded(tmp_path, "own", "def handler(data, context): return 'own'\n")
    other = loaded(tmp_path, "other")
    code = model_code(tmp_path, site)
    assert handled(code.handlers(own)) == "own"
    assert code.handlers(other) == Handlers()
    universal = Handlers(handler=lambda data, context: "universal")
    code = model_code(tmp_path, site, universal)
    assert handled(code.handlers(other)) == "universal"
    assert handled(code.handlers(own)) == "own"


def test_a_code_folder_without_inference_py_installs_but_has_no_handlers(tmp_path, site):
    """As a single model's: its requirements.txt is installed (a failed install refuses the
    load), and the universal code or the built-in formats serve it."""
    model = loaded(tmp_path, "m", None, {"requirements.txt": "tinypkg==1.0\n"})
    tiny_wheel(model.code_dir / "wheelhouse")
    code = model_code(tmp_path, site)
    prepared = code.prepare(model, time.monotonic() + 120)
    assert not prepared.handlers and Path(prepared.environment).is_dir()  # installed, no pool
    assert code.handlers(prepared) == Handlers()  # the built-in formats, not a 500 per request
    universal = Handlers(handler=lambda data, context: "universal")
    assert handled(model_code(tmp_path, site, universal).handlers(prepared)) == "universal"
    failing = loaded(tmp_path, "f", None, UNINSTALLABLE)
    assert refused(code, failing, 120).status == 400


def test_handlers_are_cached_until_forgotten(tmp_path, site):
    model = loaded(tmp_path, "m", "def handler(data, context): return 1\n")
    code = model_code(tmp_path, site)
    first = code.handlers(model)
    assert code.handlers(model) is first
    (model.code_dir / "inference.py").write_text("def handler(data, context): return 2\n")
    code.forget(model)
    assert handled(code.handlers(model)) == 2


def test_inference_py_alone_runs_in_the_workers_and_is_tried_at_load(tmp_path, site):
    model = loaded(tmp_path, "m", "def handler(d, c): return 1\n")
    code = model_code(tmp_path, site)
    assert code.prepare(model, time.monotonic() + 60) == model  # no handler processes
    broken = loaded(tmp_path, "b", "import json\nimport no_such_module_anywhere\n")
    error = refused(code, broken, 60)
    assert error.status == 400
    assert "No module named 'no_such_module_anywhere' (inference.py, line 2)" in error.message
    hanging = loaded(tmp_path, "h", "import time\ntime.sleep(600)\n")
    error = refused(code, hanging, 2)
    assert error.status == 504
    assert error.message == f"importing {hanging.code_dir / 'inference.py'} took over 2s"


def test_an_import_error_of_several_lines_is_answered_whole(tmp_path, site):
    noisy = "import sys\nprint('noise', file=sys.stderr)\nraise ValueError('first\\nsecond')\n"
    model = loaded(tmp_path, "m", noisy)
    error = refused(model_code(tmp_path, site), model, 60)
    assert error.status == 400
    assert error.message == (
        f"importing {model.code_dir / 'inference.py'} failed: ValueError: first\nsecond "
        "(inference.py, line 3)"
    )


def test_requirements_give_the_model_handler_processes_of_its_own(tmp_path, site, caplog):
    model = loaded(tmp_path, "m", "import tinypkg\ndef handler(d, c): return tinypkg.VALUE\n")
    tiny_wheel(model.code_dir / "wheelhouse")
    (model.code_dir / "requirements.txt").write_text("tinypkg==1.0\n")
    code = model_code(tmp_path, site)
    prepared = code.prepare(model, time.monotonic() + 120)
    try:
        assert prepared.handlers and (tmp_path / "state" / "pools").is_dir()
        handlers = code.handlers(prepared)
        assert handlers.remote is not None and handlers.names == ["handler"]
        assert "tinypkg" not in sys.modules  # imported in its own processes only
    finally:
        code.release(prepared)
    assert not Path(prepared.handlers).exists()
    assert not list((tmp_path / "state" / "pools").iterdir())
    assert Path(prepared.environment).is_dir()  # kept: a load again needs no pip
    with caplog.at_level(logging.INFO):
        again = code.prepare(model, time.monotonic() + 120)
    try:
        assert again.environment == prepared.environment and again.handlers
        assert "the environment made before" in caplog.text
    finally:
        code.release(again)


def test_a_failing_install_is_400_with_pips_message_and_leaves_nothing(tmp_path, site):
    model = loaded(tmp_path, "m", "def handler(d, c): return 1\n", UNINSTALLABLE)
    error = refused(model_code(tmp_path, site), model, 120)
    assert error.status == 400
    assert error.message.startswith("pip install -r code/requirements.txt failed:\nERROR")
    environments = tmp_path / "state" / "environments"
    assert not [p for p in environments.iterdir() if p.is_dir()]


def environments(tmp_path) -> list[Path]:
    return [p for p in (tmp_path / "state" / "environments").iterdir() if p.is_dir()]


def test_an_import_error_in_its_own_processes_fails_the_load_with_400(tmp_path, site):
    model = loaded(tmp_path, "m", "import no_such_module_anywhere\n", OWN_ENVIRONMENT)
    error = refused(model_code(tmp_path, site), model, 60)
    assert error.status == 400
    assert "No module named 'no_such_module_anywhere' (inference.py, line 1)" in error.message
    assert not list((tmp_path / "state" / "pools").iterdir())
    assert environments(tmp_path) == []  # the environment this load made is gone too


def test_a_failed_load_removes_the_environment_it_made_not_one_made_before(tmp_path, site):
    model = loaded(tmp_path, "m", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    code = model_code(tmp_path, site)
    code.abandon(code.prepare(model, time.monotonic() + 60))  # it failed after prepare
    assert environments(tmp_path) == []
    code.release(code.prepare(model, time.monotonic() + 60))  # loaded and unloaded: kept
    (kept,) = environments(tmp_path)
    again = code.prepare(model, time.monotonic() + 60)
    assert again.environment == str(kept)
    code.abandon(again)  # a load on the environment made before failed: it stays
    assert environments(tmp_path) == [kept] and not Path(again.handlers).exists()


HOLD_SLOT = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_load_in_progress_holds_a_slot_until_it_ends_even_by_a_crash(tmp_path, site):
    model = loaded(tmp_path, "a", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    code = model_code(tmp_path, site, max_count=1)
    slots = tmp_path / "state" / "reserved"
    slots.mkdir()
    holder = subprocess.Popen(  # another worker's load, preparing
        [sys.executable, "-c", HOLD_SLOT, str(slots / "sagemaker-handlers-x")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        error = refused(code, model, 60)
        assert error.status == 507 and "loaded or loading" in error.message
    finally:
        holder.kill()  # that worker crashed
        holder.wait(10)
    prepared = code.prepare(model, time.monotonic() + 60)
    try:
        assert prepared.handlers and not list(slots.iterdir())
    finally:
        code.release(prepared)


def test_past_the_bound_of_environments_a_load_is_507_before_any_install(tmp_path, site):
    first = loaded(tmp_path, "a", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    second = loaded(tmp_path, "b", "def handler(d, c): return 2\n", UNINSTALLABLE)
    code = model_code(tmp_path, site, max_count=1)
    registry = Registry(tmp_path / "state")
    prepared = code.prepare(first, time.monotonic() + 60)
    registry.write({"a": prepared}, registry.generation())
    try:
        error = refused(code, second, 60)
        assert error.status == 507 and "SAGEMAKER_MME_MAX_ENVIRONMENTS=1" in error.message
    finally:
        code.release(prepared)


def test_pools_no_loaded_model_uses_are_stopped_once_older_than_a_load(tmp_path, site):
    first = loaded(tmp_path, "a", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    code = model_code(tmp_path, site)
    prepared = code.prepare(first, time.monotonic() + 60)  # never listed (as after a crash)
    code.prepare(loaded(tmp_path, "b"), time.monotonic() + 60)
    assert Path(prepared.handlers).exists()  # young: maybe a load in progress
    for record in (tmp_path / "state" / "pools").iterdir():
        os.utime(record, (time.time() - 3600, time.time() - 3600))
    code.prepare(loaded(tmp_path, "c"), time.monotonic() + 60)
    assert not Path(prepared.handlers).exists()


def test_the_pools_of_models_a_model_server_death_unloaded_free_their_slots_at_once(tmp_path, site):
    first = loaded(tmp_path, "a", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    code = model_code(tmp_path, site, max_count=1)
    registry = Registry(tmp_path / "state")
    prepared = code.prepare(first, time.monotonic() + 60)
    registry.write({"a": prepared}, registry.generation())
    registry.invalidate()  # a model server died: "a" counts as unloaded; SageMaker loads it
    again = code.prepare(first, time.monotonic() + 60)  # not a 507 for the next 6 minutes
    try:
        assert not Path(prepared.handlers).exists()
        assert again.handlers != prepared.handlers and handler_pool.running(Path(again.handlers))
    finally:
        code.release(again)


def test_a_model_whose_pool_is_gone_gets_one_again(tmp_path, site):
    model = loaded(tmp_path, "a", "def handler(d, c): return 1\n", OWN_ENVIRONMENT)
    code = model_code(tmp_path, site)
    registry = Registry(tmp_path / "state")
    prepared = code.prepare(model, time.monotonic() + 60)
    registry.write({"a": prepared}, registry.generation())
    master = int((Path(prepared.handlers) / "pid").read_text())
    os.killpg(master, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while handler_pool.running(Path(prepared.handlers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    revived = code.revive(prepared)
    try:
        assert revived.handlers != prepared.handlers and handler_pool.running(
            Path(revived.handlers)
        )
        assert registry.read()["a"] == revived
        assert code.revive(revived) == revived  # alive: nothing to do
    finally:
        code.release(revived)
