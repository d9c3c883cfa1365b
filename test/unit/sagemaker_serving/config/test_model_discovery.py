"""Tests for sagemaker_serving.config.model_discovery on fake model directories."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from sagemaker_serving.config.model_discovery import (
    Model,
    ModelDiscoveryError,
    default_model,
    discover_models,
    find_model,
)


def version(root: Path, *parts: str, filename: str = "saved_model.pb") -> Path:
    """Create root/parts.../filename (an empty fake SavedModel); return its directory."""
    directory = root.joinpath(*parts)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / filename).write_bytes(b"")
    return directory


def test_version_directly_in_model_dir_is_named_model(tmp_path):
    version(tmp_path, "1")
    assert discover_models(tmp_path) == [Model("model", tmp_path.resolve(), (1,))]


def test_named_models_sorted_with_sorted_versions(tmp_path):
    version(tmp_path, "zeta", "2")
    version(tmp_path, "zeta", "10")
    version(tmp_path, "zeta", "1")
    version(tmp_path, "alpha", "00000123")
    version(tmp_path, "alpha", "000")
    assert discover_models(tmp_path) == [
        Model("alpha", (tmp_path / "alpha").resolve(), (0, 123)),
        Model("zeta", (tmp_path / "zeta").resolve(), (1, 2, 10)),
    ]


def test_nested_export_layout_and_pbtxt(tmp_path):
    version(tmp_path, "export", "Servo", "1585000000")
    version(tmp_path, "other", "3", filename="saved_model.pbtxt")
    models = discover_models(tmp_path)
    assert models == [
        Model("Servo", (tmp_path / "export" / "Servo").resolve(), (1585000000,)),
        Model("other", (tmp_path / "other").resolve(), (3,)),
    ]


def test_models_beside_a_top_level_model(tmp_path):
    version(tmp_path, "1")
    version(tmp_path, "extra", "5")
    assert [(m.name, m.versions) for m in discover_models(tmp_path)] == [
        ("extra", (5,)),
        ("model", (1,)),
    ]


def test_hidden_directories_are_skipped(tmp_path):
    version(tmp_path, ".git", "m", "1")
    version(tmp_path, "m", ".00000111")
    version(tmp_path, "m", "2")
    assert discover_models(tmp_path) == [Model("m", (tmp_path / "m").resolve(), (2,))]


def test_top_level_code_directory_is_skipped(tmp_path):
    version(tmp_path, "code", "1")
    version(tmp_path, "code", "lib", "1")
    version(tmp_path, "m", "1")
    assert [m.name for m in discover_models(tmp_path)] == ["m"]


def test_nested_code_directory_is_a_model(tmp_path):
    version(tmp_path, "a", "code", "1")
    assert [m.name for m in discover_models(tmp_path)] == ["code"]


def test_only_code_directory_is_no_model(tmp_path):
    version(tmp_path, "code", "1")
    with pytest.raises(ModelDiscoveryError, match="no SavedModel"):
        discover_models(tmp_path)


def test_numeric_sibling_without_saved_model_is_skipped_with_warning(tmp_path, caplog):
    version(tmp_path, "m", "1")
    (tmp_path / "m" / "2").mkdir()
    (tmp_path / "m" / "2" / "variables").mkdir()
    with caplog.at_level(logging.WARNING, logger="sagemaker_serving.config.model_discovery"):
        models = discover_models(tmp_path)
    assert models == [Model("m", (tmp_path / "m").resolve(), (1,))]
    assert str(tmp_path / "m" / "2") in caplog.text


def test_saved_model_must_be_a_file(tmp_path):
    (tmp_path / "m" / "1" / "saved_model.pb").mkdir(parents=True)
    with pytest.raises(ModelDiscoveryError):
        discover_models(tmp_path)


def test_non_numeric_version_directory_is_not_a_version(tmp_path):
    version(tmp_path, "m", "v1")
    version(tmp_path, "m", "1a")
    version(tmp_path, "m", "²")
    with pytest.raises(ModelDiscoveryError, match="no SavedModel"):
        discover_models(tmp_path)


def test_saved_model_in_a_numeric_model_directory(tmp_path):
    version(tmp_path, "123", "4")
    assert discover_models(tmp_path) == [Model("123", (tmp_path / "123").resolve(), (4,))]


def test_missing_model_dir(tmp_path):
    with pytest.raises(ModelDiscoveryError, match="does not exist"):
        discover_models(tmp_path / "absent")


def test_model_dir_is_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ModelDiscoveryError, match="is not a directory"):
        discover_models(tmp_path / "file")


def test_an_unreadable_model_dir_says_so(tmp_path, monkeypatch):
    """A model mounted with mode 0700 for another uid (the image runs as uid 1000): the reason
    and the way out, not a bare PermissionError on a file it then looks for."""
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: path != tmp_path and real_access(path, mode)
    )
    with pytest.raises(ModelDiscoveryError, match=r"cannot be read by uid \d+.*--user 0"):
        discover_models(tmp_path)


def test_empty_model_dir_names_expected_layouts(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ModelDiscoveryError) as info:
        discover_models(tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message
    assert "<model_dir>/<version>/saved_model.pb" in message
    assert "<model_dir>/<name>/<version>/saved_model.pb" in message


def test_saved_model_without_version_directory_gets_a_hint(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ModelDiscoveryError, match="needs a version directory"):
        discover_models(tmp_path)


def test_a_named_saved_model_without_version_directory_gets_a_hint(tmp_path):
    (tmp_path / "my_model").mkdir()
    (tmp_path / "my_model" / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ModelDiscoveryError) as info:
        discover_models(tmp_path)
    assert "the SavedModel in my_model/ needs a version directory, e.g. my_model/1/" in str(
        info.value
    )


def test_a_saved_model_without_version_directory_beside_models_is_not_skipped_silently(
    tmp_path, caplog
):
    version(tmp_path, "good", "1")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "saved_model.pb").write_bytes(b"")
    assert [m.name for m in discover_models(tmp_path)] == ["good"]
    assert f"skipping {tmp_path / 'bad'}: a SavedModel without a version directory" in caplog.text
    assert f"(put it in {tmp_path / 'bad' / '1'})" in caplog.text


def test_a_version_directory_given_as_the_model_says_to_name_its_parent(tmp_path, caplog):
    version(tmp_path, "m", "1")  # a multi-model load's url pointing at m/1, not m
    assert find_model(tmp_path / "m" / "1", "m") is None
    assert f"a version directory itself: name {tmp_path / 'm'} instead" in caplog.text


def test_same_name_at_two_paths_is_an_error(tmp_path):
    version(tmp_path, "a", "m", "1")
    version(tmp_path, "b", "m", "1")
    with pytest.raises(ModelDiscoveryError, match="two models are named 'm'") as info:
        discover_models(tmp_path)
    assert str((tmp_path / "a" / "m").resolve()) in str(info.value)
    assert str((tmp_path / "b" / "m").resolve()) in str(info.value)


def test_subdirectory_named_model_clashes_with_top_level_model(tmp_path):
    version(tmp_path, "1")
    version(tmp_path, "model", "1")
    with pytest.raises(ModelDiscoveryError, match="two models are named 'model'"):
        discover_models(tmp_path)


@pytest.mark.parametrize("name", ["my model", "-dash", "caf\u00e9", "a+b", "_under"])
def test_invalid_model_name(tmp_path, name):
    version(tmp_path, name, "1")
    with pytest.raises(ModelDiscoveryError, match="not a valid model name"):
        discover_models(tmp_path)


def test_two_directories_for_one_version_number(tmp_path):
    version(tmp_path, "m", "1")
    version(tmp_path, "m", "01")
    with pytest.raises(ModelDiscoveryError, match="both version 1"):
        discover_models(tmp_path)


def test_version_number_beyond_int64_is_skipped(tmp_path, caplog):
    version(tmp_path, "m", "1")
    version(tmp_path, "m", str(2**63))
    with caplog.at_level(logging.WARNING):
        assert discover_models(tmp_path)[0].versions == (1,)
    assert str(2**63) in caplog.text


def test_symlink_loop_terminates(tmp_path):
    version(tmp_path, "m", "1")
    (tmp_path / "m" / "loop").symlink_to(tmp_path)
    (tmp_path / "self").symlink_to(".")
    assert discover_models(tmp_path) == [Model("m", (tmp_path / "m").resolve(), (1,))]


def test_symlinked_model_keeps_link_name_and_resolves_base_path(tmp_path):
    real = version(tmp_path / "store", "real_name", "7").parent
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(real)
    assert discover_models(root) == [Model("linked", real.resolve(), (7,))]


def test_shared_version_directory_counts_for_both_models(tmp_path):
    version(tmp_path, "a", "1")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "1").symlink_to(tmp_path / "a" / "1")
    assert [(m.name, m.versions) for m in discover_models(tmp_path)] == [
        ("a", (1,)),
        ("b", (1,)),
    ]


def test_relative_model_dir_gives_absolute_base_paths(tmp_path, monkeypatch):
    version(tmp_path, "models", "m", "1")
    monkeypatch.chdir(tmp_path)
    (model,) = discover_models(Path("models"))
    assert model.base_path.is_absolute()
    assert model.base_path == (tmp_path / "models" / "m").resolve()


def test_unreadable_directory_is_skipped(tmp_path, caplog):
    version(tmp_path, "m", "1")
    locked = tmp_path / "locked"
    version(locked, "x", "1")
    locked.chmod(0)
    try:
        if any(True for _ in _try_list(locked)):
            pytest.skip("running as root: permissions are not enforced")
        with caplog.at_level(logging.WARNING):
            assert [m.name for m in discover_models(tmp_path)] == ["m"]
        assert str(locked) in caplog.text
    finally:
        locked.chmod(0o755)


def _try_list(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except OSError:
        return []


M_A = Model("a", Path("/models/a"), (1,))
M_B = Model("b", Path("/models/b"), (1,))


def test_default_model_is_first_by_name():
    assert default_model([M_B, M_A], None) is M_A


def test_default_model_requested():
    assert default_model([M_A, M_B], "b") is M_B


def test_default_model_requested_missing_lists_available():
    with pytest.raises(ModelDiscoveryError, match=r"'c' not found; available: a, b"):
        default_model([M_B, M_A], "c")
