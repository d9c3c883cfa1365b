"""code/: whether it is there, its handlers and why they cannot be used (its requirements:
environments/test_build.py)."""

from __future__ import annotations

import sys

import pytest

from sagemaker_serving.environments import hidden as user_imports
from sagemaker_serving.environments.build import has_user_code
from sagemaker_serving.environments.hidden import HiddenPackages
from sagemaker_serving.user_code import loading as user_code
from sagemaker_serving.user_code.loading import Handlers, UserCodeError


@pytest.fixture
def code(tmp_path, monkeypatch):
    """An empty code/ directory; imports from it are undone afterwards."""
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("inference", "inference_m", "helper"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    directory = tmp_path / "code"
    directory.mkdir()
    return directory


@pytest.mark.parametrize("name", ["inference.py", "requirements.txt", "lib"])
def test_any_of_its_three_parts_is_user_code(code, name):
    assert not has_user_code(code)
    (code / name).mkdir() if name == "lib" else (code / name).write_text("")
    assert has_user_code(code)


def test_no_inference_py_means_the_built_in_behaviour(code):
    assert user_code.load_handlers(code) == Handlers()


def test_handler_wins_over_input_and_output_handlers(code):
    (code / "inference.py").write_text(
        "def handler(data, context): return 'h'\ndef input_handler(data, context): return 'i'\n"
    )
    handlers = user_code.load_handlers(code)
    assert handlers.handler is not None and handlers.handler(None, None) == "h"
    assert handlers.input_handler is None and handlers.source == str(code / "inference.py")


def test_an_input_handler_alone_is_enough(code):
    (code / "inference.py").write_text("def input_handler(data, context): return 'i'\n")
    handlers = user_code.load_handlers(code)
    assert handlers.input_handler is not None and handlers.output_handler is None
    assert handlers.names == ["input_handler"]


def test_code_imports_its_own_modules_from_lib(code):
    (code / "lib").mkdir()
    (code / "lib" / "helper.py").write_text("VALUE = 'from lib'\n")
    (code / "inference.py").write_text(
        "import helper\ndef handler(data, context): return helper.VALUE\n"
    )
    handlers = user_code.load_handlers(
        code, module_name="inference_m", paths=[str(code / "lib"), str(code)]
    )
    assert handlers.handler is not None and handlers.handler(None, None) == "from lib"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("x = 1\n", "looked for handler, input_handler, output_handler"),
        ("def output_handler(r, c): pass\n", "defines neither handler(data, context) nor"),
        (
            "import json\nraise RuntimeError('broken on purpose')\n",
            "RuntimeError: broken on purpose (inference.py, line 2)",
        ),
        ("x = 1\ndef handler(:\n", "SyntaxError: invalid syntax (inference.py, line 2)"),
        ("import no_such_module_anywhere\n", "No module named 'no_such_module_anywhere'"),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3 (inference.py, line 2)"),
    ],
)
def test_unusable_code_is_a_user_code_error(code, text, words):
    (code / "inference.py").write_text(text)
    with pytest.raises(UserCodeError) as info:
        user_code.load_handlers(code)
    assert words in str(info.value)
