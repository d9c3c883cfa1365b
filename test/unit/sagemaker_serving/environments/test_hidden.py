"""What user code can import in the service's own processes (environments/hidden.py): the hidden
container packages, unless the user's directories provide them; no module set aside."""

from __future__ import annotations

import sys

import pytest

from sagemaker_serving.environments import hidden as user_imports
from sagemaker_serving.environments.hidden import HiddenPackages, add_user_paths


@pytest.fixture(autouse=True)
def no_finder_in_this_process(monkeypatch):
    """The finder is installed once per process: not in pytest's."""
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset({"hidden_thing"})))
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_a_hidden_name_fails_unless_a_user_directory_provides_it(tmp_path):
    finder = HiddenPackages(frozenset({"hidden_thing"}))
    with pytest.raises(ModuleNotFoundError, match=r"code/requirements\.txt or code/lib"):
        finder.find_spec("hidden_thing", None)
    assert finder.find_spec("hidden_thing.sub", ["/x"]) is None
    assert finder.find_spec("json", None) is None
    (tmp_path / "hidden_thing.py").write_text("X = 1\n")
    finder.user_paths.append(str(tmp_path))
    assert finder.find_spec("hidden_thing", None).origin == str(tmp_path / "hidden_thing.py")


def test_user_paths_go_first_once_and_may_provide_hidden_names(tmp_path):
    add_user_paths([str(tmp_path / "a"), str(tmp_path / "b")])
    add_user_paths([str(tmp_path / "a")])
    assert sys.path[:2] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert sys.path.count(str(tmp_path / "a")) == 1
    assert user_imports._finder is not None
    assert user_imports._finder.user_paths == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_module_the_service_has_is_the_one_user_code_gets(tmp_path):
    import json as service_json

    (tmp_path / "json.py").write_text("VERSION = 'user'\n")
    add_user_paths([str(tmp_path)])
    import json

    assert json is service_json  # never a second copy (environments/ runs such code apart)
