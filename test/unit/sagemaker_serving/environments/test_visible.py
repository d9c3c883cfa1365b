"""What user code sees of the container (environments/visible.py), without a server."""

from __future__ import annotations

import importlib.metadata
import sys

from sagemaker_serving.environments import visible


def test_the_offered_packages_bring_what_they_need():
    seen = visible.visible_distributions()
    assert {"requests", "urllib3", "boto3", "botocore", "numpy", "protobuf", "grpcio"} <= seen
    assert {"falcon", "gunicorn", "orjson"} <= seen
    assert "tensorflow" not in seen and "pillow" not in seen


def test_container_only_packages_are_hidden_and_the_offered_ones_are_not():
    hidden = visible.hidden_names()
    assert {"PIL", "tensorflow", "pytest", "tfs_model_server", "tfs_batch_transform"} <= hidden
    offered = {"requests", "urllib3", "boto3", "numpy", "grpc", "google", "sagemaker_serving"}
    assert not offered & hidden
    assert not set(sys.stdlib_module_names) & hidden


def test_the_names_user_code_shares_with_the_service():
    shared = visible.container_names()
    assert {"numpy", "requests", "grpc", "google", "falcon", "sagemaker_serving"} <= shared
    assert "tensorflow" not in shared and "PIL" not in shared


def test_provided_names_are_packages_and_modules(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "assets").mkdir()  # data only: no module
    (tmp_path / "assets" / "labels.txt").write_text("")
    (tmp_path / "mod.py").write_text("")
    (tmp_path / "ext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "pkg-1.0.dist-info").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "README.txt").write_text("")
    assert visible.provided_names([tmp_path, tmp_path / "missing"]) == {"pkg", "mod", "ext"}


def test_requirement_names_skip_extras_and_unreadable_lines():
    lines = [
        "numpy==1.26.4",
        "Pillow>=10",
        "",
        "git+https://example.com/x.git",
        "protobuf; python_version >= '3.8'",
        'ml_dtypes ; extra == "dev"',
        'Typing_Extensions>=4; platform_system == "Linux" and extra == "test"',
    ]
    assert visible.requirement_names(lines) == ["numpy", "pillow", "protobuf"]


def test_the_site_folder_links_exactly_the_visible_distributions(tmp_path):
    site = visible.link_site(tmp_path / "site", {"requests", "numpy"}, [tmp_path / "ours"])
    names = {entry.name for entry in site.iterdir()}
    version = importlib.metadata.version("requests")
    assert {"requests", f"requests-{version}.dist-info", "numpy"} <= names
    assert "urllib3" not in names and "tensorflow" not in names
    assert all((site / name).is_symlink() for name in names)
    found = {d.metadata["Name"].lower() for d in importlib.metadata.distributions(path=[str(site)])}
    assert found == {"requests", "numpy"}
    assert not (site / "ours").exists()  # a package folder that does not exist is skipped


def _fake_distribution(site, name: str, files: list[str]) -> None:
    for file in files:
        (site / file).parent.mkdir(parents=True, exist_ok=True)
        (site / file).write_text("")
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in record))


def test_a_folder_two_distributions_share_is_a_real_folder_of_links(tmp_path, monkeypatch):
    installed = tmp_path / "installed"
    _fake_distribution(installed, "ns-visible", ["nspkg/visible/__init__.py", "nspkg/v.py"])
    _fake_distribution(installed, "ns-hidden", ["nspkg/hidden/__init__.py"])
    monkeypatch.syspath_prepend(str(installed))
    site = visible.link_site(tmp_path / "site", {"ns-visible"})
    assert (site / "nspkg").is_dir() and not (site / "nspkg").is_symlink()
    assert (site / "nspkg" / "visible").is_symlink() and (site / "nspkg" / "v.py").is_symlink()
    assert not (site / "nspkg" / "hidden").exists()
    assert (site / "ns_visible-1.0.dist-info").is_symlink()
