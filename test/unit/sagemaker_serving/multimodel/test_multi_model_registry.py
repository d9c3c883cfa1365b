"""The multi-model registry, names and paging (the HTTP API is in test/integration)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemaker_serving.multimodel.manager import (
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


HOLD_LOCK = """
import sys, time
from pathlib import Path
from sagemaker_serving.multimodel.manager import Registry
with Registry(Path(sys.argv[1])).locked():
    print("locked", flush=True)
    time.sleep(60)
"""


@contextlib.contextmanager
def lock_held_elsewhere(state_dir: Path) -> Iterator[subprocess.Popen]:
    """Another process holding the registry's lock (it says so once it has it), killed after."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(state_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield holder
    finally:
        holder.kill()
        holder.wait(10)


def test_the_lock_excludes_other_processes_and_gives_up_at_its_deadline(tmp_path):
    with lock_held_elsewhere(tmp_path):
        started = time.monotonic()
        with pytest.raises(MultiModelError) as info, Registry(tmp_path).locked(wait_seconds=0.5):
            pass
        assert info.value.status == 503 and time.monotonic() - started >= 0.5


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


# ----- loads that fail or time out, and a model server's death (fake model servers) -------


class FakeModelServers:
    """Two instances: every reload config they get, and a `version_states` of our choice."""

    def __init__(self, states=None) -> None:
        self.grpc_ports = [1, 2]
        self.rest_ports = [3, 4]
        self.reloads: list[tuple[int, list[str]]] = []
        self.states = states or (lambda index, model, deadline: {1: "AVAILABLE"})

    def reload_config(self, index: int, config: bytes, deadline: float) -> None:
        from tensorflow_serving.config.model_server_config_pb2 import ModelServerConfig

        parsed = ModelServerConfig.FromString(config)
        self.reloads.append((index, [m.name for m in parsed.model_config_list.config]))

    def version_states(self, index: int, model: str, deadline: float) -> dict[int, str]:
        return self.states(index, model, deadline)


@pytest.fixture
def model_root(tmp_path):
    root = tmp_path / "models"
    for name in ("a", "b"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "saved_model.pb").write_bytes(b"pb")
    (tmp_path / "state").mkdir()
    return root


def manager(tmp_path, model_root, client) -> MultiModelManager:
    return MultiModelManager(Registry(tmp_path / "state"), client, model_root, 5.0, 0)


def test_a_load_past_its_deadline_is_504_and_taken_back_out_of_every_instance(tmp_path, model_root):
    from sagemaker_serving.tfs_client.errors import ModelServerTimeout

    def states(index, model, deadline):
        if model == internal_name("b"):
            raise ModelServerTimeout("The model server did not answer before the deadline")
        return {1: "AVAILABLE"}

    client = FakeModelServers(states)
    mm = manager(tmp_path, model_root, client)
    mm.load("a", "a")
    client.reloads.clear()
    with pytest.raises(MultiModelError) as info:
        mm.load("b", "b")
    assert info.value.status == 504 and "deadline" in info.value.message
    # the load went to both instances, then both got the list without it
    assert client.reloads[-2:] == [(0, [internal_name("a")]), (1, [internal_name("a")])]
    assert set(mm.registry.read()) == {"a"}


def test_an_unexpected_failure_while_loading_is_a_500_and_taken_back(tmp_path, model_root):
    def states(index, model, deadline):
        raise KeyError("version")

    client = FakeModelServers(states)
    with pytest.raises(MultiModelError) as info:
        manager(tmp_path, model_root, client).load("b", "b")
    assert info.value.status == 500 and "KeyError" in info.value.message
    assert client.reloads[-2:] == [(0, []), (1, [])]


def test_a_model_is_listed_only_once_prepared_and_a_failed_prepare_loads_nothing(
    tmp_path, model_root
):
    client = FakeModelServers()
    mm = manager(tmp_path, model_root, client)
    listed_while_preparing = []

    def prepare(model, deadline):
        listed_while_preparing.append(set(mm.registry.read()))
        assert deadline > time.monotonic()

    mm.load("a", "a", prepare=prepare)
    assert listed_while_preparing == [set()]
    assert set(mm.registry.read()) == {"a"}

    def failing(model, deadline):
        raise MultiModelError("pip install failed", 400)

    client.reloads.clear()
    with pytest.raises(MultiModelError):
        mm.load("b", "b", prepare=failing)
    assert client.reloads == []  # never sent to a model server
    assert set(mm.registry.read()) == {"a"}


def test_after_a_model_server_death_everything_counts_as_unloaded_without_the_lock(
    tmp_path, model_root
):
    from types import SimpleNamespace

    from sagemaker_serving.launcher.serve import forget_models_on_crash

    client = FakeModelServers()
    mm = manager(tmp_path, model_root, client)
    mm.load("a", "a")
    dead = SimpleNamespace(name="model-server-0")
    stack = SimpleNamespace(run_dir=tmp_path, model_servers=[dead])
    (tmp_path / "multi-model").symlink_to(tmp_path / "state")  # service_process.mme_state_dir
    with lock_held_elsewhere(tmp_path / "state") as holder:
        forget_models_on_crash(stack)(dead)  # type: ignore[arg-type]
        assert holder.poll() is None  # it returned while another process held the lock
        assert mm.registry.read() == {}
        with pytest.raises(MultiModelError) as info:
            mm.get("a")
        assert info.value.status == 404
    # loaded again: the model servers get the list without the models of the old generation
    client.reloads.clear()
    mm.load("b", "b")
    assert client.reloads == [(0, [internal_name("b")]), (1, [internal_name("b")])]
    mm.load("a", "a")
    assert set(mm.registry.read()) == {"a", "b"}


def test_a_change_based_on_an_older_generation_counts_as_lost(tmp_path):
    registry = Registry(tmp_path)
    _, generation = registry.snapshot()
    registry.invalidate()  # a model server died while the change was under way
    registry.write({"a": model("a")}, generation)
    assert registry.read() == {}
