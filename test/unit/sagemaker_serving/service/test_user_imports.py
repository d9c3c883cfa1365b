"""What user code can import (user_imports.py), without a server."""

from __future__ import annotations

import sys

import pytest

from sagemaker_serving.service import user_imports
from sagemaker_serving.service.user_imports import (
    HiddenPackages,
    hidden_names,
    own_imports,
    provided_names,
    visible_distributions,
)


@pytest.fixture(autouse=True)
def no_finder_in_this_process(monkeypatch):
    """own_imports installs the finder once per process: not in pytest's."""
    monkeypatch.setattr(user_imports, "_finder", HiddenPackages(frozenset()))


def test_the_offered_packages_bring_what_they_need():
    visible = visible_distributions(user_imports.USER_DISTRIBUTIONS)
    assert {"requests", "urllib3", "boto3", "botocore", "numpy", "protobuf", "grpcio"} <= visible
    assert "tensorflow" not in visible and "pillow" not in visible


def test_container_only_packages_are_hidden_and_the_offered_ones_are_not():
    hidden = hidden_names()
    assert {"PIL", "tensorflow", "pytest", "tfs_model_server", "tfs_batch_transform"} <= hidden
    offered = {"requests", "urllib3", "boto3", "numpy", "grpc", "google", "sagemaker_serving"}
    assert not offered & hidden
    assert not set(sys.stdlib_module_names) & hidden


def test_provided_names_are_packages_and_modules(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "mod.py").write_text("")
    (tmp_path / "ext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "pkg-1.0.dist-info").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "README.txt").write_text("")
    assert provided_names([tmp_path, tmp_path / "missing"]) == {"pkg", "mod", "ext"}


def test_a_hidden_name_fails_unless_a_user_directory_provides_it(tmp_path):
    finder = HiddenPackages(frozenset({"hidden_thing"}))
    with pytest.raises(ModuleNotFoundError, match=r"code/requirements\.txt or code/lib"):
        finder.find_spec("hidden_thing", None)
    assert finder.find_spec("hidden_thing.sub", ["/x"]) is None
    assert finder.find_spec("json", None) is None
    (tmp_path / "hidden_thing.py").write_text("X = 1\n")
    finder.user_paths.append(str(tmp_path))
    assert finder.find_spec("hidden_thing", None).origin == str(tmp_path / "hidden_thing.py")


def _module(directory, name: str, text: str) -> None:
    (directory / f"{name}.py").write_text(text)


def test_users_get_their_own_version_and_the_service_keeps_its_own(tmp_path):
    import json as service_json  # stands in for a package the service imported

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _module(tmp_path / "a", "json", "VERSION = 'a'\n")
    _module(tmp_path / "b", "json", "VERSION = 'b'\n")
    _module(tmp_path / "a", "user_a", "import json\nSEEN = json.VERSION\n")
    _module(tmp_path / "b", "user_b", "import json\nSEEN = json.VERSION\n")
    path_before = list(sys.path)
    with own_imports([str(tmp_path / "a")], keep=False):
        import user_a
    with own_imports([str(tmp_path / "b")], keep=False):
        import user_b
    assert (user_a.SEEN, user_b.SEEN) == ("a", "b")
    assert sys.modules["json"] is service_json
    assert "user_a" not in sys.modules and "user_b" not in sys.modules
    assert sys.path == path_before


def test_one_user_per_process_keeps_its_paths_and_modules(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    _module(tmp_path, "kept_helper", "VALUE = 3\n")
    with own_imports([str(tmp_path)], keep=True):
        import kept_helper
    assert sys.modules["kept_helper"] is kept_helper
    assert sys.path[0] == str(tmp_path)
    sys.modules.pop("kept_helper")
