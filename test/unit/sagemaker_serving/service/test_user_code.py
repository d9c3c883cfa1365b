"""code/: whether it is there, its requirements (pip into a directory of its own), its
handlers and why they cannot be used."""

from __future__ import annotations

import sys

import pytest
from conftest import tiny_wheel

from sagemaker_serving.service import user_code, user_imports
from sagemaker_serving.service.user_code import Handlers, UserCodeError
from sagemaker_serving.service.user_imports import HiddenPackages


@pytest.fixture
def code(tmp_path, monkeypatch):
    """An empty code/ directory; imports from it are undone afterwards."""
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # wheels from code/wheelhouse only
    for name in ("inference", "inference_m", "helper"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    directory = tmp_path / "code"
    directory.mkdir()
    return directory


@pytest.mark.parametrize("name", ["inference.py", "requirements.txt", "lib"])
def test_any_of_its_three_parts_is_user_code(code, name):
    assert not user_code.has_user_code(code)
    (code / name).mkdir() if name == "lib" else (code / name).write_text("")
    assert user_code.has_user_code(code)


def test_code_paths_are_requirements_then_lib_then_code(code, tmp_path):
    installed = tmp_path / "installed"
    assert user_code.code_paths(code, installed) == [str(code)]
    installed.mkdir()
    (code / "lib").mkdir()
    assert user_code.code_paths(code, installed) == [str(installed), str(code / "lib"), str(code)]


def test_requirements_install_from_the_wheelhouse_into_their_own_directory(code, tmp_path):
    nothing = user_code.install_requirements(code, tmp_path / "target", 60)
    assert nothing is None  # no requirements.txt
    tiny_wheel(code / "wheelhouse")
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    target = user_code.install_requirements(code, tmp_path / "target", 120)
    assert target == tmp_path / "target"
    assert (target / "tinypkg" / "__init__.py").read_text() == "VALUE = 42\n"


def test_requirements_beside_lib_are_not_installed(code, tmp_path):
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    (code / "lib").mkdir()
    assert user_code.install_requirements(code, tmp_path / "target", 60) is None
    assert not (tmp_path / "target").exists()


def test_a_failing_or_slow_install_says_why(code, tmp_path):
    (code / "requirements.txt").write_text("no-such-package-anywhere==1.0\n")
    with pytest.raises(UserCodeError) as info:
        user_code.install_requirements(code, tmp_path / "target", 120)
    assert "pip install -r" in str(info.value) and "no-such-package-anywhere" in str(info.value)
    with pytest.raises(user_code.RequirementsTimeout):
        user_code.install_requirements(code, tmp_path / "target", 0.001)


def test_no_inference_py_means_the_built_in_behaviour(code):
    assert user_code.load_handlers(code) == Handlers()


def test_handler_wins_over_input_and_output_handlers(code):
    (code / "inference.py").write_text(
        "def handler(data, context): return 'h'\ndef input_handler(data, context): return 'i'\n"
    )
    handlers = user_code.load_handlers(code)
    assert handlers.handler is not None and handlers.handler(None, None) == "h"
    assert handlers.input_handler is None and handlers.source == str(code / "inference.py")


def test_either_of_input_and_output_handler_is_enough(code):
    (code / "inference.py").write_text("def output_handler(response, context): return 'o'\n")
    handlers = user_code.load_handlers(code)
    assert handlers.input_handler is None and handlers.output_handler is not None


def test_code_imports_its_own_modules_from_lib(code):
    (code / "lib").mkdir()
    (code / "lib" / "helper.py").write_text("VALUE = 'from lib'\n")
    (code / "inference.py").write_text(
        "import helper\ndef handler(data, context): return helper.VALUE\n"
    )
    handlers = user_code.load_handlers(
        code, module_name="inference_m", paths=user_code.code_paths(code, None)
    )
    assert handlers.handler is not None and handlers.handler(None, None) == "from lib"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("x = 1\n", "defines neither handler"),
        ("raise RuntimeError('broken on purpose')\n", "RuntimeError: broken on purpose"),
        ("def handler(:\n", "SyntaxError"),
    ],
)
def test_unusable_code_is_a_user_code_error(code, text, words):
    (code / "inference.py").write_text(text)
    with pytest.raises(UserCodeError) as info:
        user_code.load_handlers(code)
    assert words in str(info.value)
