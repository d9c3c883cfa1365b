"""Each model's handlers: its own code/, else the universal code directory, else none; its
requirements installed at load into a directory of its own."""

from __future__ import annotations

import sys
import time

import pytest
from conftest import tiny_wheel

from sagemaker_serving.multimodel.code import ModelCode
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.registry import LoadedModel, internal_name
from sagemaker_serving.service import user_imports
from sagemaker_serving.service.user_code import Handlers
from sagemaker_serving.service.user_imports import HiddenPackages


@pytest.fixture(autouse=True)
def undone_imports(monkeypatch):
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # wheels from code/wheelhouse only


def loaded(tmp_path, name: str, code: str | None = None) -> LoadedModel:
    url = tmp_path / "models" / name
    (url / "1").mkdir(parents=True)
    if code is not None:
        (url / "code").mkdir()
        (url / "code" / "inference.py").write_text(code)
    return LoadedModel(name, str(url), internal_name(name), str(url), (1,))


def handled(handlers: Handlers) -> object:
    assert handlers.handler is not None
    return handlers.handler(None, None)


def test_a_models_own_code_else_the_universal_code_else_none(tmp_path):
    universal = tmp_path / "universal"
    universal.mkdir()
    own = loaded(tmp_path, "own", "def handler(data, context): return 'own'\n")
    other = loaded(tmp_path, "other")
    code = ModelCode(universal, [str(universal)], tmp_path / "packages", 60)
    assert handled(code.handlers(own)) == "own"
    assert code.handlers(other) == Handlers()  # the universal code dir has no code either
    (universal / "inference.py").write_text("def handler(data, context): return 'universal'\n")
    code = ModelCode(universal, [str(universal)], tmp_path / "packages", 60)
    assert handled(code.handlers(other)) == "universal"
    assert code.code_dir(own) == own.code_dir and code.code_dir(other) == universal


def test_handlers_are_cached_until_forgotten(tmp_path):
    model = loaded(tmp_path, "m", "def handler(data, context): return 1\n")
    code = ModelCode(None, [], tmp_path / "packages", 60)
    first = code.handlers(model)
    assert code.handlers(model) is first
    (model.code_dir / "inference.py").write_text("def handler(data, context): return 2\n")
    code.forget(model)
    assert handled(code.handlers(model)) == 2


def test_requirements_install_at_load_for_that_model_alone(tmp_path):
    model = loaded(tmp_path, "m", "import tinypkg\ndef handler(d, c): return tinypkg.VALUE\n")
    tiny_wheel(model.code_dir / "wheelhouse")
    (model.code_dir / "requirements.txt").write_text("tinypkg==1.0\n")
    code = ModelCode(None, [], tmp_path / "packages", 120)
    code.install(model, time.monotonic() + 120)
    assert (tmp_path / "packages" / model.internal_name / "tinypkg").is_dir()
    assert handled(code.handlers(model)) == 42
    assert "tinypkg" not in sys.modules
    code.remove(model)  # unloaded (or its load failed after the install): nothing stays
    assert not (tmp_path / "packages" / model.internal_name).exists()


def test_a_failing_install_is_400_and_leaves_nothing(tmp_path):
    model = loaded(tmp_path, "m", "def handler(d, c): return 1\n")
    (model.code_dir / "requirements.txt").write_text("no-such-package-anywhere==1.0\n")
    code = ModelCode(None, [], tmp_path / "packages", 120)
    with pytest.raises(MultiModelError) as info:
        code.install(model, time.monotonic() + 120)
    assert info.value.status == 400
    assert info.value.message.startswith("Model m: pip install -r ")
    assert not (tmp_path / "packages" / model.internal_name).exists()
