"""core.manager: version directories, version policies, config checks, and a ModelManager
loading, serving and unloading real SavedModels (half_plus_three's versions 123 and 124)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from google.protobuf import text_format

from tfs_model_server.core import manager as core_manager
from tfs_model_server.core.manager import ModelConfig, ModelManager, State
from tfs_model_server.core.servable import Servable
from tfs_model_server.errors import Code, ServingError


def _error(call, *args, **kwargs) -> ServingError:
    with pytest.raises(ServingError) as info:
        call(*args, **kwargs)
    return info.value


@pytest.fixture
def three(model_root: Path, tmp_path: Path) -> Path:
    """A copy of half_plus_three (versions 123 and 124) this test may change."""
    return Path(shutil.copytree(model_root / "half_plus_three", tmp_path / "three"))


def states(manager: ModelManager, name: str) -> dict[int, State]:
    return {version: state for version, state, _ in manager.version_states(name)}


# --- the file system and the version policy ------------------------------------------------


def test_scan_versions_takes_numeric_directories_first_one_wins(tmp_path: Path) -> None:
    for name in ("1", "007", "7", "-2", "abc", "9223372036854775808", "12"):
        (tmp_path / name).mkdir()
    found = core_manager.scan_versions(str(tmp_path))
    assert found == {1: tmp_path / "1", 7: tmp_path / "007", 12: tmp_path / "12"}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", [3]),
        ("latest { num_versions: 2 }", [2, 3]),
        ("all {}", [1, 2, 3]),
        ("specific { versions: 1 versions: 3 versions: 9 }", [1, 3]),
    ],
)
def test_aspired_versions_follow_the_policy(policy: str, expected: list[int]) -> None:

    config = text_format.Parse(
        f"model_version_policy {{ {policy} }}" if policy else "", ModelConfig()
    )
    on_disk = {v: Path(str(v)) for v in (1, 2, 3)}
    assert sorted(core_manager.aspired_versions(config, on_disk)) == expected


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            [ModelConfig(name="m", base_path="/a", model_platform="tensorflow")] * 2,
            "Illegal to list model m multiple times in config list",
        ),
        (
            [ModelConfig(name="m", base_path="relative", model_platform="tensorflow")],
            "Expected model m to have an absolute path or URI; got base_path()=relative",
        ),
        (
            [ModelConfig(name="m", base_path="/a", model_platform="onnx")],
            "Model m has an unsupported model_platform onnx; only 'tensorflow' is served",
        ),
        (
            [ModelConfig(name="m", base_path="/a")],
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            "ModelServerConfig::model_platform.",
        ),
    ],
)
def test_validate_config(configs: list[ModelConfig], message: str) -> None:
    err = _error(core_manager.validate_config, configs)
    assert (err.code, err.message) == (Code.INVALID_ARGUMENT, message)


# --- loading, serving, unloading -------------------------------------------------------------


def test_latest_version_is_loaded_and_served(make_manager, model_config, three: Path) -> None:
    models = make_manager()
    models.set_config([model_config("m", three)])
    assert models.wait_until_available(["m"], timeout_s=60) == []
    assert states(models, "m") == {124: State.AVAILABLE}
    with models.servable("m") as servable:
        assert (servable.name, servable.version) == ("m", 124)
    err = _error(lambda: models.servable("m", 123).__enter__())
    assert (err.code, err.message) == (
        Code.NOT_FOUND,
        "Servable not found for request: Specific(m, 123)",
    )
    err = _error(lambda: models.servable("nope").__enter__())
    assert err.message == "Servable not found for request: Latest(nope)"


def test_policy_changes_load_before_they_unload(make_manager, model_config, three: Path) -> None:
    models = make_manager()
    models.set_config([model_config("m", three, all_versions=True)])
    assert states(models, "m") == {124: State.AVAILABLE, 123: State.AVAILABLE}
    specific = model_config("m", three)
    specific.model_version_policy.specific.versions.append(123)
    models.set_config([specific])
    assert states(models, "m") == {124: State.END, 123: State.AVAILABLE}
    with models.servable("m") as servable:
        assert servable.version == 123


def test_a_new_version_on_disk_replaces_the_latest(make_manager, model_config, three: Path) -> None:
    models = make_manager()
    models.set_config([model_config("m", three)])
    shutil.copytree(three / "124", three / "125")
    models.poll()
    assert states(models, "m") == {125: State.AVAILABLE, 124: State.END}


def test_labels_name_available_versions(make_manager, model_config, three: Path) -> None:
    models = make_manager()
    config = model_config("m", three, all_versions=True)
    models.set_config([config])
    config.version_labels["stable"] = 123
    models.apply_labels([config])
    with models.servable("m", label="stable") as servable:
        assert servable.version == 123
    assert _error(lambda: models.servable("m", label="beta").__enter__()).message == (
        "Unrecognized servable version label: beta"
    )
    config.version_labels["next"] = 999
    err = _error(models.apply_labels, [config])
    assert (err.code, err.message) == (
        Code.FAILED_PRECONDITION,
        "Request to assign label to version 999 of model m, which is not currently available "
        "for inference",
    )


def test_a_new_label_may_name_an_unavailable_version_when_allowed(
    make_manager, model_config, three: Path
) -> None:
    models = make_manager(allow_labels_for_unavailable=True)
    config = model_config("m", three)
    models.set_config([config])
    config.version_labels["next"] = 999
    models.apply_labels([config])
    assert _error(lambda: models.servable("m", label="next").__enter__()).message == (
        "Servable not found for request: Specific(m, 999)"
    )


def test_a_failed_load_is_recorded_and_reported(make_manager, model_config, tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "1"
    bad.mkdir(parents=True)
    (bad / "saved_model.pb").write_bytes(b"not a saved model")
    models = make_manager(max_load_retries=0)
    models.set_config([model_config("bad", tmp_path / "bad")])
    errors = models.wait_until_available(["bad"], timeout_s=60)
    assert len(errors) == 1 and errors[0].startswith("{name: bad version: 1}: ")
    [(version, state, error)] = models.version_states("bad")
    assert (version, state) == (1, State.END) and error is not None


def test_waiting_for_a_model_without_versions_times_out(
    make_manager, model_config, tmp_path: Path
) -> None:
    models = make_manager()
    models.set_config([model_config("empty", tmp_path)])
    assert models.wait_until_available(["empty", "unknown"], timeout_s=0.2) == [
        "unknown: not configured",
        "empty: timed out waiting to become available",
    ]
    assert _error(models.version_states, "empty").message == (
        "Could not find any versions of model empty"
    )


def test_a_removed_model_is_unloaded_and_keeps_its_states(
    make_manager, model_config, three: Path
) -> None:
    models = make_manager()
    models.set_config([model_config("m", three)])
    models.set_config([])
    assert states(models, "m") == {124: State.END}
    assert _error(models.version_states, "m", 7).message == "Could not find version 7 of model m"


def test_unloading_waits_for_the_requests_that_hold_the_version(
    make_manager, model_config, three: Path
) -> None:
    models = make_manager()
    models.set_config([model_config("m", three)])
    holding, release = threading.Event(), threading.Event()

    def request() -> None:
        with models.servable("m"):
            holding.set()
            release.wait(10)

    worker = threading.Thread(target=request)
    worker.start()
    assert holding.wait(10)
    unloader = threading.Thread(target=models.set_config, args=([],))
    unloader.start()
    end = time.monotonic() + 10
    while states(models, "m")[124] is not State.UNLOADING:  # the unload waits for the request
        assert time.monotonic() < end, "the unload never began"
        time.sleep(0.01)
    assert worker.is_alive()
    release.set()
    unloader.join(10)
    worker.join(10)
    assert states(models, "m") == {124: State.END}


# --- load and unload threads -------------------------------------------------------------------


class Meeting:
    """A loader (or closer) that goes on only when `count` calls are inside it at once: run
    one at a time, the first call's wait times out and fails."""

    def __init__(self, count: int) -> None:
        self.barrier = threading.Barrier(count, timeout=10)
        self.threads: set[str] = set()

    def meet(self) -> None:
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()


def _models(three: Path, tmp_path: Path, count: int, model_config) -> list[ModelConfig]:
    """`count` models, each a copy of half_plus_three."""
    return [
        model_config(f"m{i}", shutil.copytree(three, tmp_path / f"copy{i}")) for i in range(count)
    ]


def test_the_first_poll_loads_every_model_at_once(model_config, three: Path, tmp_path) -> None:
    meeting = Meeting(4)

    def load(name: str, version: int, path: Path) -> Servable:
        meeting.meet()
        return Servable(name, version, path)

    models = ModelManager(load, poll_wait_seconds=0, max_load_retries=0, initial_load_threads=8)
    try:
        models.set_config(_models(three, tmp_path, 4, model_config))
        assert models.wait_until_available([f"m{i}" for i in range(4)], timeout_s=60) == []
        assert len(meeting.threads) == 4 and all(t.startswith("tfs-load") for t in meeting.threads)
    finally:
        models.close()


@pytest.mark.parametrize("threads", [0, 1])
def test_later_loads_go_one_at_a_time_without_load_threads(
    model_config, three: Path, tmp_path: Path, threads: int
) -> None:
    inside, most = [0], [0]
    lock = threading.Lock()
    callers = set()

    def load(name: str, version: int, path: Path) -> Servable:
        callers.add(threading.current_thread().name)
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.05)
            return Servable(name, version, path)
        finally:
            with lock:
                inside[0] -= 1

    models = ModelManager(load, poll_wait_seconds=0, max_load_retries=0, load_threads=threads)
    try:
        configs = _models(three, tmp_path, 3, model_config)
        models.set_config(configs[:1])
        callers.clear()
        models.set_config(configs)
        assert models.wait_until_available(["m1", "m2"], timeout_s=60) == []
        assert most[0] == 1
        assert callers == {threading.current_thread().name}  # the poll's own thread
    finally:
        models.close()


def test_later_loads_use_the_load_threads(model_config, three: Path, tmp_path: Path) -> None:
    meeting = Meeting(3)

    def load(name: str, version: int, path: Path) -> Servable:
        if name != "m0":
            meeting.meet()
        return Servable(name, version, path)

    models = ModelManager(
        load, poll_wait_seconds=0, max_load_retries=0, load_threads=3, initial_load_threads=1
    )
    try:
        configs = _models(three, tmp_path, 4, model_config)
        models.set_config(configs[:1])
        models.set_config(configs)
        assert models.wait_until_available([c.name for c in configs], timeout_s=60) == []
    finally:
        models.close()


def test_unloads_use_the_unload_threads(model_config, three: Path, tmp_path: Path) -> None:
    meeting = Meeting(3)

    class Closing(Servable):
        def close(self) -> None:
            meeting.meet()
            super().close()

    models = ModelManager(Closing, poll_wait_seconds=0, max_load_retries=0, unload_threads=3)
    try:
        models.set_config(_models(three, tmp_path, 3, model_config))
        models.set_config([])
        assert [states(models, f"m{i}") for i in range(3)] == [{124: State.END}] * 3
        assert all(t.startswith("tfs-unload") for t in meeting.threads)
    finally:
        models.close()


def test_version_states_look_a_version_up_directly(make_manager, model_config, three: Path):
    """TF Serving's GetModelStatusImpl: a given version is looked up by itself, so its error
    names the version, even for a model the server does not know."""
    models = make_manager()
    models.set_config([model_config("m", three, all_versions=True)])
    assert [v for v, _, _ in models.version_states("m", 123)] == [123]
    for name, version in (("m", 99), ("unknown", 99)):
        err = _error(models.version_states, name, version)
        assert (err.code, err.message) == (
            Code.NOT_FOUND,
            f"Could not find version 99 of model {name}",
        )
    err = _error(models.version_states, "unknown")
    assert err.message == "Could not find any versions of model unknown"


class _Loaded:
    """A servable stand-in for tests that churn many models (nothing to load)."""

    def close(self) -> None:
        pass


def test_unloads_are_reported_and_only_recent_removed_models_are_kept(
    model_config, tmp_path: Path
) -> None:
    """Each unloaded version and each model gone from the config is reported (its metrics
    go); of the removed models, only the last RETIRED_KEPT keep their END states, so a
    stream of distinct names does not grow the manager."""
    from tfs_model_server.core.manager import RETIRED_KEPT

    reports: list[tuple[str, list[Path], bool]] = []
    manager = ModelManager(
        lambda name, version, path: _Loaded(),  # type: ignore[arg-type,return-value]
        poll_wait_seconds=0,
        on_unloaded=lambda name, paths, gone: reports.append((name, list(paths), gone)),
    )
    shared = tmp_path / "shared"
    (shared / "1").mkdir(parents=True)
    try:
        count = RETIRED_KEPT + 20
        for i in range(count):
            base = tmp_path / f"m{i}"
            (base / "1").mkdir(parents=True)
            manager.set_config([model_config("shared", shared), model_config(f"m{i}", base)])
            assert states(manager, f"m{i}") == {1: State.AVAILABLE}
        manager.set_config([model_config("shared", shared)])
        assert ("m0", [tmp_path / "m0" / "1"], False) in reports
        assert ("m0", [tmp_path / "m0" / "1"], True) in reports
        assert sum(1 for name, _, gone in reports if gone) == count
        assert not any(shared / "1" in paths for _, paths, _ in reports)  # still in use
        assert states(manager, f"m{count - 1}") == {1: State.END}
        assert _error(manager.version_states, "m0").code == Code.NOT_FOUND
        assert len(manager._retired) == RETIRED_KEPT
    finally:
        manager.close()
