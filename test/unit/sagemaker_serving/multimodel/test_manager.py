"""MultiModelManager: names, urls and paging; loads that fail or time out taken back out of
every instance (two stand-in model servers: failures a real one does not make on demand);
what the model client cached is dropped when the models change (a real model server)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.manager import MultiModelManager, check_name
from sagemaker_serving.multimodel.registry import LoadedModel, Registry, internal_name
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.tfs_client.errors import ConfigRefused, ModelServerTimeout


def model(name: str) -> LoadedModel:
    return LoadedModel(name, f"/models/{name}", internal_name(name), f"/models/{name}/m", (1, 2))


@pytest.mark.parametrize(
    "name", ["", "..", "a/../b", "../x", "./a", "a\\..\\b", "x\n", "x" * 1025, 3]
)
def test_hostile_or_empty_names_are_refused(name):
    with pytest.raises(MultiModelError) as info:
        check_name(name)
    assert info.value.status == 400


class FakeModelServers:
    """Two instances: every reload config they get, and a `version_states` of our choice,
    by default version 1 AVAILABLE while the last config lists the model (shaped as
    ModelServerClient: its `grpc` and `rest` are itself)."""

    def __init__(self, states=None) -> None:
        self.grpc_ports = [1, 2]
        self.rest_ports = [3, 4]
        self.grpc = self.rest = self
        self.reloads: list[tuple[int, list[str]]] = []
        self.forgotten: list[str] = []
        self.cleared = 0
        self.states = states or self.listed

    def listed(self, index: int, model: str, deadline: float) -> dict[int, str]:
        configs = [models for i, models in self.reloads if i == index]
        return {1: "AVAILABLE"} if configs and model in configs[-1] else {}

    def reload_config(self, index: int, config: bytes, deadline: float) -> None:
        from tensorflow_serving.config.model_server_config_pb2 import ModelServerConfig

        parsed = ModelServerConfig.FromString(config)
        self.reloads.append((index, [m.name for m in parsed.model_config_list.config]))

    def version_states(self, index: int, model: str, deadline: float) -> dict[int, str]:
        return self.states(index, model, deadline)

    def forget(self, model: str) -> None:
        self.forgotten.append(model)

    def clear(self) -> None:
        self.cleared += 1


@pytest.fixture
def model_root(tmp_path):
    root = tmp_path / "models"
    for name in ("a", "b"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "saved_model.pb").write_bytes(b"pb")
    (root / "empty").mkdir()
    (tmp_path / "state").mkdir()
    return root


def manager(tmp_path, model_root, client) -> MultiModelManager:
    return MultiModelManager(Registry(tmp_path / "state"), client, model_root, 5.0, 0)


def test_pages_in_name_order_with_a_token_until_the_end(tmp_path, model_root):
    mm = manager(tmp_path, model_root, FakeModelServers())
    with mm.registry.locked():
        mm.registry.write({n: model(n) for n in ["d", "a", "c", "b", "e"]}, "")
    seen, token = [], None
    while True:
        chunk, token = mm.page(2, token)
        seen.append([m.name for m in chunk])
        if token is None:
            break
    assert seen == [["a", "b"], ["c", "d"], ["e"]]
    with pytest.raises(MultiModelError):
        mm.page(2, "x")


@pytest.mark.parametrize(
    ("url", "status", "words"),
    [
        ("/elsewhere", 400, "is outside the model directory"),
        ("../a", 400, "is outside the model directory"),
        ("x" * 300, 400, "is not a usable path"),
        ("", 400, "url must be a non-empty path"),
        ("missing", 404, "Could not find valid base path missing for servable m"),
        ("empty", 404, "Could not find valid base path empty for servable m"),
    ],
)
def test_urls_stay_in_the_model_directory_and_hold_a_model(
    tmp_path, model_root, url, status, words
):
    client = FakeModelServers()
    with pytest.raises(MultiModelError) as info:
        manager(tmp_path, model_root, client).load("m", url)
    assert (info.value.status, words in info.value.message) == (status, True), info.value
    assert client.reloads == []


def test_a_url_nesting_folders_past_pythons_recursion_limit_is_a_400(tmp_path, model_root):
    folders = [model_root / "deep"]
    for _ in range(sys.getrecursionlimit() + 100):  # os.makedirs recurses too
        folders.append(folders[-1] / "d")
    try:
        for folder in folders:
            folder.mkdir()
        with pytest.raises(MultiModelError) as info:
            manager(tmp_path, model_root, FakeModelServers()).load("m", "deep")
        assert (info.value.status, info.value.message) == (
            400,
            "url deep: its folders nest too deep",
        )
    finally:  # shutil.rmtree (pytest's clean-up) recurses as well
        for folder in reversed(folders):
            if folder.is_dir():
                folder.rmdir()


def test_load_and_unload_answer_in_the_aws_containers_words(tmp_path, model_root):
    client = FakeModelServers()
    mm = manager(tmp_path, model_root, client)
    loaded = mm.load("a", "a")
    assert (loaded.name, loaded.versions, mm.get("a")) == ("a", (1,), loaded)
    with pytest.raises(MultiModelError) as info:
        mm.load("a", "b")
    assert (info.value.status, info.value.message) == (409, "Model a is already loaded.")
    mm.unload("a")
    assert client.forgotten == [internal_name("a")] * 2  # at the load and at the unload
    for call in (mm.get, mm.unload):
        with pytest.raises(MultiModelError) as info:
            call("a")
        assert (info.value.status, info.value.message) == (404, "Model a is not loaded yet.")


def test_a_load_short_of_memory_is_507_naming_the_reserve_it_keeps(tmp_path, model_root):
    reserve = 1 << 50  # more than any machine has
    mm = MultiModelManager(
        Registry(tmp_path / "state"), FakeModelServers(), model_root, 5.0, reserve
    )
    with pytest.raises(MultiModelError) as info:
        mm.load("a", "a")
    assert (info.value.status, info.value.message) == (
        507,
        "Not enough memory to load model a: it needs about 1 MiB and 0 MiB are free beyond "
        f"SAGEMAKER_MME_MEMORY_RESERVE_MB={reserve >> 20}",
    )


def test_a_load_past_its_deadline_is_504_and_taken_back_out_of_every_instance(tmp_path, model_root):
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


@pytest.mark.parametrize(
    ("refused", "version_codes", "status"),
    [
        ("UNKNOWN", {"RESOURCE_EXHAUSTED"}, 507),  # TF Serving: a failed load under UNKNOWN
        ("RESOURCE_EXHAUSTED", set(), 507),
        ("UNKNOWN", {"INVALID_ARGUMENT"}, 500),
        ("UNKNOWN", set(), 500),
    ],
)
def test_a_refused_load_is_507_only_for_the_resource_exhausted_code_it_carries(
    tmp_path, model_root, refused, version_codes, status
):
    """The status comes from the codes the model server carries (the refusal's, the failed
    versions'), never from the words of its message."""

    class Refusing(FakeModelServers):
        def reload_config(self, index, config, deadline):
            super().reload_config(index, config, deadline)
            if internal_name("b") in self.reloads[-1][1]:
                return ConfigRefused(refused, "out of memory (the words decide nothing)")
            return None

        def version_error_codes(self, index, model, deadline):
            return version_codes if model == internal_name("b") else set()

    client = Refusing()
    with pytest.raises(MultiModelError) as info:
        manager(tmp_path, model_root, client).load("b", "b")
    assert info.value.status == status
    assert info.value.message.endswith(f"{refused}: out of memory (the words decide nothing)")
    assert client.reloads[-2:] == [(0, []), (1, [])]  # taken back out of every instance


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
        return replace(model, handlers="/pool/a")

    released = []
    mm.load("a", "a", prepare=prepare, release=released.append)
    assert listed_while_preparing == [set()]
    assert set(mm.registry.read()) == {"a"}
    assert mm.registry.read()["a"].handlers == "/pool/a" and released == []

    def failing(model, deadline):
        raise MultiModelError("pip install failed", 400)

    client.reloads.clear()
    with pytest.raises(MultiModelError):
        mm.load("b", "b", prepare=failing)
    assert client.reloads == []  # never sent to a model server
    assert set(mm.registry.read()) == {"a"}
    mm.unload("a", release=released.append)
    assert [m.handlers for m in released] == ["/pool/a"]  # what prepare made ends with it


def test_after_a_model_server_death_everything_counts_as_unloaded_without_the_lock(
    tmp_path, model_root, hold_lock
):
    from sagemaker_serving.serve import forget_models_on_crash

    client = FakeModelServers()
    mm = manager(tmp_path, model_root, client)
    mm.load("a", "a")
    dead = SimpleNamespace(name="model-server-0")
    stack = SimpleNamespace(run_dir=tmp_path, model_servers=[dead])
    (tmp_path / "multi-model").symlink_to(tmp_path / "state")  # service_process.mme_state_dir
    with hold_lock(tmp_path / "state") as holder:
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


def test_cached_metadata_is_dropped_when_any_process_changes_the_models(tmp_path, tfs_server):
    client = ModelServerClient([tfs_server.rest_port], [tfs_server.grpc_port])
    (tmp_path / "state").mkdir()
    mm = MultiModelManager(Registry(tmp_path / "state"), client, tmp_path, 5.0, 0)
    other_worker = Registry(tmp_path / "state")
    with pytest.raises(MultiModelError):
        mm.get("a")
    deadline = time.monotonic() + 10
    cached = client.metadata("half_plus_two", None, deadline)
    with pytest.raises(MultiModelError):
        mm.get("a")  # nothing changed: the cache holds
    assert client.metadata("half_plus_two", None, deadline) is cached
    other_worker.write({"a": model("a")}, other_worker.generation())
    assert mm.get("a") == model("a")
    fresh = client.metadata("half_plus_two", None, deadline)
    assert fresh is not cached and fresh == cached
    assert mm.get("a") == model("a") and client.metadata("half_plus_two", None, deadline) is fresh
    other_worker.invalidate()  # a model server died
    assert mm.page(10, None) == ([], None)
    assert client.metadata("half_plus_two", None, deadline) is not fresh


def test_a_load_that_fails_after_its_prepare_is_undone(tmp_path, model_root):
    """What `prepare` did (its requirements installed) is taken back when the load then
    fails, as the load itself is: a failed load leaves no trace."""

    def states(index, model, deadline):
        raise ModelServerTimeout("The model server did not answer before the deadline")

    prepared, undone = [], []
    mm = manager(tmp_path, model_root, FakeModelServers(states))
    with pytest.raises(MultiModelError) as info:
        mm.load("b", "b", prepare=lambda m, d: prepared.append(m.name) or m, release=undone.append)
    assert info.value.status == 504
    assert prepared == ["b"] and [m.name for m in undone] == ["b"]
    assert mm.registry.read() == {}


@pytest.mark.parametrize("name", ["\ud800", "x\udc80"])
def test_names_with_lone_surrogates_are_refused(name):
    with pytest.raises(MultiModelError) as info:
        check_name(name)
    assert info.value.status == 400 and "lone surrogates" in info.value.message
