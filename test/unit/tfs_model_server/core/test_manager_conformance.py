"""core.manager against TF Serving's own tests of model discovery and version management.

Ported from tensorflow_serving/sources/storage_path/file_system_storage_path_source_test.cc
(FileSystemStoragePathSourceTest: which directory names are versions, version policies, what
a poll does when the base path or its versions come and go) and from
tensorflow_serving/model_servers/server_core_test.cc (ServerCoreTest: config reloads, config
errors, platforms, version labels). Each test or table row keeps the TEST name it ports. As in
those tests, versions are empty directories and loading is faked (a loader that records which
directory it was given), since only the choice of versions is under test; the live-server
counterparts are in test/integration/test_model_server_lifecycle_conformance.py.

Not ported here:
- FileSystemStoragePathSourceTest.NoVersionsAtStartup with fail_if_zero_versions_at_startup,
  LastVersionNotRemoved with servable_versions_always_present, AttemptToChangePollingPeriod:
  options tensorflow_model_server does not expose (ServerCore leaves them false; the poll
  period cannot change after start-up).
- FileSystemStoragePathSourceTest.PollFilesystemOnlyOnce: a live-server case (in the
  integration file).
- ServerCoreTest.PreLoadHook, RequestLoggingOff/On, StoragePathPrefixOption,
  VersionLabelsNotAllowed, AssignExistingLabelToUnavailableVersionAllowed, the
  RelativePathsServerCoreTest cases that set model_config_list_root_dir, MultiplePlatforms,
  MultiplePlatformsWithConfigChange: ServerCore::Options fields and fake platforms with no
  tensorflow_model_server flag (only the "tensorflow" platform is served).
- ServerCoreTest.CreateWaitsTillModelsAvailable, ErroringModel, UnknownModelPlatform: already
  covered by test_manager.py (DuplicateModelNameInConfig, RelativePathFails and
  AbsolutePathSucceeds too, but their rows here add the order of the checks and URI schemes).
- ServerCoreTest.ReloadConfigWaitsTillModelsAvailable, IllegalReconfigurationToCustomConfig,
  IllegalReconfigurationFromCustomConfig, AssignLabelToUnavailableVersion(Allowed): about the
  server's config handling, ported as live-server cases.

Known differences from TF Serving not asserted here, because test_manager.py or the shared
fixtures pin our behaviour: duplicate version directories (TF Serving keeps the last name in
sorted order, "7" over "007"; we keep the first), negative directory names (absl::SimpleAtoi
makes "-2" version -2; we skip it), the texts for a missing or unsupported platform (TF Serving
>= 2.14 ends the first with ", model name is <name>"; the second reads "Model <name> requests
unsupported platform <platform>"), and version labels checked only after loading (TF Serving
checks them before it loads anything, so without --allow_version_labels_for_unavailable_models
a config can only label versions that were already AVAILABLE).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format

from tfs_model_server.core.manager import (
    ModelConfig,
    ModelManager,
    State,
    aspired_versions,
    scan_versions,
    validate_config,
)
from tfs_model_server.errors import Code, ServingError


@dataclass
class FakeServable:
    """What a load made: the version and the directory it was loaded from."""

    name: str
    version: int
    path: Path
    closed: bool = False

    def close(self) -> None:
        self.closed = True


@dataclass
class Loads:
    """A loader that records every load instead of reading a SavedModel."""

    made: list[FakeServable] = field(default_factory=list)

    def __call__(self, name: str, version: int, path: Path) -> Any:
        self.made.append(FakeServable(name, version, path))
        return self.made[-1]

    def of(self, name: str) -> list[tuple[int, str]]:
        return [(s.version, s.path.name) for s in self.made if s.name == name]


@pytest.fixture
def loads() -> Loads:
    return Loads()


@pytest.fixture
def manager(loads: Loads) -> Iterator[Callable[..., ModelManager]]:
    """manager(**options): ModelManagers over the fake loader, polled by hand; all closed."""
    made: list[ModelManager] = []

    def make(**options: Any) -> ModelManager:
        made.append(ModelManager(loads, poll_wait_seconds=0, max_load_retries=0, **options))
        return made[-1]

    yield make
    for each in made:
        each.close()


def config(name: str, base_path: Path | str, policy: str = "", **fields: Any) -> ModelConfig:
    """A TensorFlow model's config; `policy` is a model_version_policy in text format."""
    result = ModelConfig(name=name, base_path=str(base_path), **fields)
    if "model_type" not in fields and "model_platform" not in fields:
        result.model_platform = "tensorflow"
    if policy:
        text_format.Parse(policy, result.model_version_policy)
    return result


def make_dirs(base: Path, *names: str) -> Path:
    for name in names:
        (base / name).mkdir(parents=True)
    return base


def states(models: ModelManager, name: str) -> dict[int, State]:
    return {version: state for version, state, _ in models.version_states(name)}


def error(call: Callable[..., Any], *args: Any) -> tuple[Code, str]:
    with pytest.raises(ServingError) as info:
        call(*args)
    return info.value.code, info.value.message


# ===== file_system_storage_path_source_test.cc ==============================================

CHILDREN = ("non_numerical_child", "42", "33", "30", "21", "17")


@pytest.mark.parametrize(
    ("children", "policy", "expected"),
    [
        pytest.param(("non_numerical_child",), "", {}, id="NoVersionsAtStartup"),
        pytest.param(("non_numerical_child", "42", "17"), "", {42: "42"}, id="MultipleVersions"),
        pytest.param(
            ("non_numerical_child", "42", "17"),
            "all {}",
            {17: "17", 42: "42"},
            id="MultipleVersionsAtTheSameTime",
        ),
        pytest.param(
            CHILDREN,
            "latest { num_versions: 3 }",
            {42: "42", 33: "33", 30: "30"},
            id="NLatestVersions",
        ),
        pytest.param(
            CHILDREN,
            "specific { versions: 17 versions: 30 }",
            {17: "17", 30: "30"},
            id="SpecificVersions",
        ),
        pytest.param(
            ("non_numerical_child", "42", "33", "30", "21", "00017"),
            "specific { versions: 17 versions: 30 }",
            {17: "00017", 30: "30"},
            id="SpecificVersionsLeadingZeros",
        ),
        pytest.param(CHILDREN, "specific {}", {}, id="SpecificVersionsEmpty"),
        pytest.param(CHILDREN[:4], "", {42: "42"}, id="DefaultVersionPolicy"),
        pytest.param(CHILDREN[:4], "latest {}", {42: "42"}, id="DefaultNumLatestVersions"),
        pytest.param(
            ("20170111173521",),
            "all {}",
            {20170111173521: "20170111173521"},
            id="ParseTimestampedVersion",
        ),
    ],
)
def test_file_system_storage_path_source_aspired_versions(
    tmp_path: Path, children: tuple[str, ...], policy: str, expected: dict[int, str]
) -> None:
    on_disk = scan_versions(str(make_dirs(tmp_path / "base", *children)))
    aspired = aspired_versions(config("m", tmp_path / "base", policy), on_disk)
    assert {version: path.name for version, path in aspired.items()} == expected


def test_DuplicateVersions(tmp_path: Path) -> None:
    base = make_dirs(tmp_path, "non_numerical_child", "0001", "001", "00001")
    aspired = aspired_versions(config("m", base), scan_versions(str(base)))
    assert list(aspired) == [1] and aspired[1].name in ("0001", "001", "00001")


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("7", 7),
        ("0007", 7),
        ("+8", 8),
        (" 9\t", 9),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),  # does not fit an int64
        ("1_000", None),
        ("\u0661\u0662", None),  # Arabic-Indic digits: Python's int() reads them, absl does not
        ("12abc", None),
        ("1.5", None),
        ("", None),
    ],
)
def test_ParseVersionNumber_reads_names_as_absl_SimpleAtoi(
    tmp_path: Path, name: str, version: int | None
) -> None:
    """file_system_storage_path_source.cc ParseVersionNumber: absl::SimpleAtoi into an int64."""
    if name:
        (tmp_path / name).mkdir()
    assert scan_versions(str(tmp_path)) == ({} if version is None else {version: tmp_path / name})


@pytest.mark.parametrize("base_path_exists", [False, True])
def test_NoVersionsAtStartup(manager, loads: Loads, tmp_path: Path, base_path_exists: bool):
    """A base path with no versions (or none at all) loads nothing, and polls go on."""
    base = tmp_path / "base"
    if base_path_exists:
        make_dirs(base, "non_numerical_child")
    models = manager()
    models.set_config([config("m", base)])
    models.poll()
    assert error(models.version_states, "m") == (
        Code.NOT_FOUND,
        "Could not find any versions of model m",
    )
    assert loads.made == []


def test_FilesAppearAfterStartup(manager, loads: Loads, tmp_path: Path) -> None:
    base = tmp_path / "base"
    models = manager()
    models.set_config([config("m", base)])
    assert loads.made == []
    make_dirs(base, "3")
    models.poll()
    assert states(models, "m") == {3: State.AVAILABLE}
    assert loads.of("m") == [(3, "3")]


def test_MultipleServables(manager, loads: Loads, tmp_path: Path) -> None:
    models = manager()
    models.set_config(
        [
            config("servable_0", make_dirs(tmp_path / "0", "1", "3")),
            config("servable_1", make_dirs(tmp_path / "1", "42")),
            config("servable_2", make_dirs(tmp_path / "2")),
        ]
    )
    assert states(models, "servable_0") == {3: State.AVAILABLE}
    assert states(models, "servable_1") == {42: State.AVAILABLE}
    assert error(models.version_states, "servable_2")[0] is Code.NOT_FOUND


def test_ChangeSetOfServables(manager, loads: Loads, tmp_path: Path) -> None:
    """The servable in both configs is never unloaded and loaded again."""
    configs = [config(f"servable_{i}", make_dirs(tmp_path / str(i), "0")) for i in range(3)]
    models = manager()
    models.set_config(configs[:2])
    models.set_config(configs[1:])
    assert [states(models, f"servable_{i}") for i in range(3)] == [
        {0: State.END},
        {0: State.AVAILABLE},
        {0: State.AVAILABLE},
    ]
    assert [(s.name, s.closed) for s in loads.made] == [
        ("servable_0", True),
        ("servable_1", False),
        ("servable_2", False),
    ]


def test_ChangeVersionPolicy(manager, loads: Loads, tmp_path: Path) -> None:
    base = make_dirs(tmp_path / "base", "1", "02", "3", "5", "8", "13")
    models = manager()
    models.set_config([config("m", base, "latest { num_versions: 2 }")])
    assert states(models, "m") == {13: State.AVAILABLE, 8: State.AVAILABLE}
    models.set_config([config("m", base, "specific { versions: 2 versions: 5 }")])
    assert states(models, "m") == {
        13: State.END,
        8: State.END,
        5: State.AVAILABLE,
        2: State.AVAILABLE,
    }
    assert sorted(loads.of("m")) == [(2, "02"), (5, "5"), (8, "8"), (13, "13")]


def test_ServableVersionDirRenamed(manager, tmp_path: Path) -> None:
    base = make_dirs(tmp_path / "base", "1", "2", "3", "5", "8")
    models = manager()
    models.set_config([config("m", base, "all {}")])
    assert set(states(models, "m").values()) == {State.AVAILABLE}
    (base / "2").rename(base / "2.denied")
    (base / "5").rename(base / "5.denied")
    (base / "8").rmdir()
    models.poll()
    assert states(models, "m") == {
        8: State.END,
        5: State.END,
        3: State.AVAILABLE,
        2: State.END,
        1: State.AVAILABLE,
    }


@pytest.mark.parametrize(
    ("remove", "expected"),
    [
        pytest.param("version", State.END, id="LastVersionNotRemoved-version-dir-deleted"),
        # PollFileSystemForServable fails on a missing base path: no aspired-versions call
        pytest.param("base", State.AVAILABLE, id="LastVersionNotRemoved-base-path-deleted"),
    ],
)
def test_LastVersionNotRemoved(manager, tmp_path: Path, remove: str, expected: State) -> None:
    """servable_versions_always_present is false in tensorflow_model_server: once its last
    version directory is gone, the model is unloaded (but not when the base path is gone)."""
    base = make_dirs(tmp_path / "base", "42")
    models = manager()
    models.set_config([config("m", base)])
    assert states(models, "m") == {42: State.AVAILABLE}
    shutil.rmtree(base / "42" if remove == "version" else base)
    models.poll()
    assert states(models, "m") == {42: expected}


# ===== server_core_test.cc ==================================================================


def test_ReloadConfigUnloadsModels_and_ReloadConfigHandlesLoadingAPreviouslyUnloadedModel(
    manager, loads: Loads, tmp_path: Path
) -> None:
    models = manager()
    model = config("m", make_dirs(tmp_path / "base", "123"))
    models.set_config([model])
    models.set_config([])
    assert states(models, "m") == {123: State.END}
    models.set_config([model])
    assert states(models, "m") == {123: State.AVAILABLE}
    with models.servable("m") as servable:
        assert servable.version == 123
    assert loads.of("m") == [(123, "123"), (123, "123")]


def test_ReloadConfigChangeModelBasePath(manager, tmp_path: Path) -> None:
    one_version = make_dirs(tmp_path / "one", "123")
    two_versions = make_dirs(tmp_path / "two", "123", "124")
    models = manager()
    for base, version in ((one_version, 123), (two_versions, 124), (one_version, 123)):
        models.set_config([config("m", base)])
        with models.servable("m") as servable:
            assert (servable.version, servable.path) == (version, base / str(version))


TF = {"model_platform": "tensorflow"}


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        pytest.param(
            [config("m", "/a", model_platform="tensorflow", model_type=1)],
            "Illegal setting both ModelServerConfig::model_type (deprecated) and "
            "ModelServerConfig::model_platform, model name is m",
            id="IllegalConfigModelTypeAndPlatformSet",
        ),
        pytest.param(  # server_core.cc GetPlatform
            [config("m", "/a", model_type=2)],
            "ModelServerConfig::model_type choice 2 not supported.",
            id="IllegalConfigModelTypeAndPlatformSet-model_type-OTHER",
        ),
        pytest.param(  # ValidateModelConfigList checks names before paths
            [config("m", "relative", **TF), config("m", "relative", **TF)],
            "Illegal to list model m multiple times in config list",
            id="DuplicateModelNameInConfig-before-paths",
        ),
        pytest.param(
            [config("m", "/a", **TF), config("m_relative", "a", **TF)],
            "Expected model m_relative to have an absolute path or URI; got base_path()=a",
            id="MixedAbsoluteRelativeFails",
        ),
        pytest.param(  # io::ParseURI: a scheme is [a-zA-Z][0-9a-zA-Z.]* before "://"
            [config("m", "models/a://b", **TF)],
            "Expected model m to have an absolute path or URI; got base_path()=models/a://b",
            id="RelativePathFails-not-a-URI-scheme",
        ),
    ],
)
def test_server_core_config_errors(configs: list[ModelConfig], message: str) -> None:
    assert error(validate_config, configs) == (Code.INVALID_ARGUMENT, message)


@pytest.mark.parametrize("base_path", ["/a", "s3://bucket/m", "gs.x://bucket/m"])
def test_AbsolutePathSucceeds(base_path: str) -> None:
    validate_config([config("m", base_path)])


def test_DeprecatedModelTypeConfig(manager, loads: Loads, tmp_path: Path) -> None:
    models = manager()
    models.set_config([config("m", make_dirs(tmp_path / "base", "123"), model_type=1)])
    assert states(models, "m") == {123: State.AVAILABLE}
    # model_type TENSORFLOW and model_platform "tensorflow" are the same platform
    models.set_config([config("m", tmp_path / "base")])
    assert loads.of("m") == [(123, "123")]


def test_IllegalToChangeModelPlatform(manager, tmp_path: Path) -> None:
    models = manager()
    base = make_dirs(tmp_path / "base", "123")
    models.set_config([config("m", base)])
    assert error(models.set_config, [config("m", base, model_platform="platform_1")]) == (
        Code.INVALID_ARGUMENT,
        "Illegal to change a model's platform. For model m platform was tensorflow and new "
        "platform requested is platform_1",
    )
    assert states(models, "m") == {123: State.AVAILABLE}
    # a model new to the config is not a change of platform: its platform is unsupported
    code, message = error(models.set_config, [config("n", base, model_platform="platform_1")])
    assert code is Code.INVALID_ARGUMENT and "platform_1" in message


def labelled(base: Path, **labels: int) -> ModelConfig:
    result = config("m", base, "all {}")
    for label, version in labels.items():
        result.version_labels[label] = version
    return result


@pytest.fixture
def two_versions(tmp_path: Path) -> Path:
    """SwitchToHalfPlusTwoWith2Versions: versions 123 and 124 (kTestModelBogusVersion is 777)."""
    return make_dirs(tmp_path / "base", "123", "124")


def test_ModelSpecMultipleVersionsAvailable(manager, two_versions: Path) -> None:
    models = manager()
    models.set_config([labelled(two_versions)])
    for version, served in ((None, 124), (123, 123)):  # latest, then a specific version
        with models.servable("m", version) as servable:
            assert servable.version == served
    models.apply_labels([labelled(two_versions, A=123, B=124)])
    for label, served in (("A", 123), ("B", 124)):
        with models.servable("m", label=label) as servable:
            assert servable.version == served
    assert error(lambda: models.servable("m", label="nonexistent label").__enter__()) == (
        Code.INVALID_ARGUMENT,
        "Unrecognized servable version label: nonexistent label",
    )


def test_AssignExistingLabelToUnavailableVersionDisallowed(manager, two_versions: Path) -> None:
    """With allow_version_labels_for_unavailable_models, a label that already names a
    version may not move to one that is not available; the label map is left as it was."""
    models = manager(allow_labels_for_unavailable=True)
    models.set_config([labelled(two_versions)])
    models.apply_labels([labelled(two_versions, A=123, B=124)])
    assert error(models.apply_labels, [labelled(two_versions, A=777, B=123)]) == (
        Code.FAILED_PRECONDITION,
        "Request to assign label to version 777 of model m, which is not currently available "
        "for inference",
    )
    for label, version in (("A", 123), ("B", 124)):
        with models.servable("m", label=label) as servable:
            assert servable.version == version


def test_AssignLabelToUnavailableVersionAllowed_again(manager, two_versions: Path) -> None:
    """server_core.cc UpdateModelVersionLabelMap: with allow_version_labels_for_unavailable_models
    only a label that names *another* version may not name an unavailable one, so the same
    config (e.g. a reload that adds a model) may be applied again."""
    models = manager(allow_labels_for_unavailable=True)
    models.set_config([labelled(two_versions)])
    for _ in range(2):
        models.apply_labels([labelled(two_versions, **{"nice try": 777})])
    assert error(lambda: models.servable("m", label="nice try").__enter__()) == (
        Code.NOT_FOUND,
        "Servable not found for request: Specific(m, 777)",
    )
