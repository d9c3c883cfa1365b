"""The multi-model registry: one JSON file under a lock shared by every process, and its
generations (a model server's death makes every model count as unloaded)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.registry import LoadedModel, Registry, internal_name


def model(name: str) -> LoadedModel:
    return LoadedModel(name, f"/models/{name}", internal_name(name), f"/models/{name}/m", (1, 2))


def test_internal_names_are_stable_safe_and_distinct():
    names = ["a", "a/b", "über", "x" * 2000, "a%2Fb", "A"]
    internal = [internal_name(n) for n in names]
    assert len(set(internal)) == len(names)
    assert all(i.startswith("mme-") and i[4:].isalnum() and len(i) == 36 for i in internal)
    assert internal_name("a/b") == internal_name("a/b")


def test_a_loaded_model_knows_its_code_and_its_model_server_config():
    loaded = model("a")
    assert loaded.code_dir == Path("/models/a/code")
    as_model = loaded.as_model()
    assert (as_model.name, as_model.base_path, tuple(as_model.versions)) == (
        internal_name("a"),
        Path("/models/a/m"),
        (1, 2),
    )


def test_registry_round_trips_and_replaces_atomically(tmp_path):
    registry = Registry(tmp_path)
    assert registry.read() == {}
    with registry.locked():
        registry.write({"a": model("a"), "b/c": model("b/c")}, registry.generation())
    assert registry.read() == {"a": model("a"), "b/c": model("b/c")}
    assert not list(tmp_path.glob("*.tmp"))


def test_the_stamp_changes_with_every_write_and_generation(tmp_path):
    registry = Registry(tmp_path)
    stamps = [registry.snapshot()[1:]]
    for models in ({"a": model("a")}, {"a": model("a")}, {}):
        registry.write(models, registry.generation())
        stamps.append(registry.snapshot()[1:])
    registry.invalidate()
    stamps.append(registry.snapshot()[1:])
    assert len(set(stamps)) == len(stamps)
    assert registry.snapshot() == ({}, *stamps[-1])


def test_the_lock_excludes_other_processes_and_gives_up_at_its_deadline(tmp_path, hold_lock):
    with hold_lock(tmp_path):
        started = time.monotonic()
        with pytest.raises(MultiModelError) as info, Registry(tmp_path).locked(wait_seconds=0.5):
            pass
        assert info.value.status == 503 and time.monotonic() - started >= 0.5


def test_invalidate_needs_no_lock(tmp_path, hold_lock):
    registry = Registry(tmp_path)
    with registry.locked():
        registry.write({"a": model("a")}, registry.generation())
    with hold_lock(tmp_path):
        registry.invalidate()
        assert registry.read() == {}


def test_a_change_based_on_an_older_generation_counts_as_lost(tmp_path):
    registry = Registry(tmp_path)
    _, generation, _ = registry.snapshot()
    registry.invalidate()  # a model server died while the change was under way
    registry.write({"a": model("a")}, generation)
    assert registry.read() == {}


MARK_NAME = """
import os, sys, time
from pathlib import Path
from sagemaker_serving.multimodel.registry import Registry
with Registry(Path(sys.argv[1])).loading(sys.argv[2]):
    print("marked", flush=True)
    time.sleep(60)
"""


def test_a_name_being_loaded_is_a_409_until_its_load_ends_even_by_a_crash(tmp_path):
    registry = Registry(tmp_path)
    with registry.loading("a"):
        with pytest.raises(MultiModelError) as info, registry.loading("a"):
            pass
        assert info.value.status == 409
        with registry.loading("b"):  # another name: no wait
            pass
    with registry.loading("a"):  # over: free again
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", MARK_NAME, str(tmp_path), "a"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "marked\n"
        with pytest.raises(MultiModelError), registry.loading("a"):
            pass
    finally:
        holder.kill()  # a loader that crashed: no cleanup ran
        holder.wait(10)
    with registry.loading("a"):
        pass
