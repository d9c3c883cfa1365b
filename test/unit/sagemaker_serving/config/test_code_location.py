"""User code under the model directory that nothing reads is found, and only that."""

from __future__ import annotations

from pathlib import Path

from sagemaker_serving.config.model_discovery import misplaced_code


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def test_code_anywhere_but_where_it_is_read_is_found(tmp_path):
    for name in (
        "code/inference.py",  # read
        "code/lib/pkg/inference.py",  # a module of code/lib: read with it
        "half_plus_three/code/inference.py",  # the classic mistake
        "half_plus_three/123/saved_model.pb",
        "other/inference.py",
        "inference.py",
        "empty/code/requirements.txt",
        ".hidden/code/inference.py",
    ):
        touch(tmp_path / name)
    assert misplaced_code(tmp_path, tmp_path / "code") == [
        tmp_path / "empty" / "code",
        tmp_path / "half_plus_three" / "code",  # stands for its inference.py
        tmp_path / "inference.py",
        tmp_path / "other" / "inference.py",
    ]


def test_with_code_read_from_elsewhere_the_top_code_folder_is_not_read(tmp_path):
    touch(tmp_path / "code" / "inference.py")
    assert misplaced_code(tmp_path, None) == [tmp_path / "code"]


def test_a_symbolic_link_is_not_followed(tmp_path):
    touch(tmp_path / "elsewhere" / "code" / "inference.py")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "link").symlink_to(tmp_path / "elsewhere")
    assert misplaced_code(tmp_path / "models", tmp_path / "models" / "code") == []
