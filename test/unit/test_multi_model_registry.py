"""The multi-model registry, names and paging (the HTTP API is in test/integration)."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from sagemaker_serving.multi_model import (
    LoadedModel,
    MultiModelError,
    MultiModelManager,
    Registry,
    check_name,
    internal_name,
)


def model(name: str) -> LoadedModel:
    return LoadedModel(name, f"/models/{name}", internal_name(name), f"/models/{name}/m", (1, 2))


def test_internal_names_are_stable_safe_and_distinct():
    names = ["a", "a/b", "über", "x" * 2000, "a%2Fb", "A"]
    internal = [internal_name(n) for n in names]
    assert len(set(internal)) == len(names)
    assert all(i.startswith("mme-") and i[4:].isalnum() and len(i) == 36 for i in internal)
    assert internal_name("a/b") == internal_name("a/b")


@pytest.mark.parametrize(
    "name", ["", "..", "a/../b", "../x", "./a", "a\\..\\b", "x\n", "x" * 1025, 3]
)
def test_hostile_or_empty_names_are_refused(name):
    with pytest.raises(MultiModelError) as info:
        check_name(name)
    assert info.value.status == 400


def test_registry_round_trips_and_replaces_atomically(tmp_path):
    registry = Registry(tmp_path)
    assert registry.read() == {}
    with registry.locked():
        registry.write({"a": model("a"), "b/c": model("b/c")}, registry.generation())
    assert registry.read() == {"a": model("a"), "b/c": model("b/c")}
    assert not list(tmp_path.glob("*.tmp"))


def _hold_lock(path, seconds):
    with Registry(path).locked():
        time.sleep(seconds)


def test_the_lock_excludes_other_processes_and_gives_up_at_its_deadline(tmp_path):
    holder = multiprocessing.get_context("spawn").Process(target=_hold_lock, args=(tmp_path, 3))
    holder.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "models.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(MultiModelError) as info, Registry(tmp_path).locked(wait_seconds=0.5):
            pass
        assert info.value.status == 503 and 0.4 < time.monotonic() - started < 2
    finally:
        holder.join(10)


def test_pages_in_name_order_with_a_token_until_the_end(tmp_path):
    registry = Registry(tmp_path)
    with registry.locked():
        registry.write({n: model(n) for n in ["d", "a", "c", "b", "e"]}, "")
    manager = MultiModelManager(registry, None, tmp_path, 1.0, 0)  # type: ignore[arg-type]
    seen, token = [], None
    while True:
        chunk, token = manager.page(2, token)
        seen.append([m.name for m in chunk])
        if token is None:
            break
    assert seen == [["a", "b"], ["c", "d"], ["e"]]
    with pytest.raises(MultiModelError):
        manager.page(2, "x")
