"""TfLiteServable: a version served from its model.tflite, against the SavedModel it was
converted from (half_plus_three_tflite) and TF Serving's own TFLite test models."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import example_models as em
from tfs_model_server.core.servable import Servable
from tfs_model_server.core.tflite_servable import TFLITE_FILE, TfLiteOptions, TfLiteServable
from tfs_model_server.errors import Code, ServingError
from tfs_model_server.options import ServerOptions
from tfs_model_server.server import tflite_options
from tfs_testdata_dir import TESTDATA

PREFER = TfLiteOptions(prefer=True)


@pytest.fixture(scope="module")
def version_dir(tmp_path_factory) -> Path:
    """half_plus_three_tflite version 1: saved_model.pb and model.tflite side by side."""
    return em.half_plus_three_tflite(tmp_path_factory.mktemp("tflite") / "hp3", 1) / "1"


@pytest.fixture(scope="module")
def both(version_dir: Path) -> Iterator[tuple[TfLiteServable, Servable]]:
    lite = TfLiteServable("hp3", 1, version_dir, TfLiteOptions(prefer=True, pools=2))
    saved = Servable("hp3", 1, version_dir)
    yield lite, saved
    lite.close()
    saved.close()


def error_of(servable: Servable, signature: str, inputs: dict, outputs: list[str]) -> ServingError:
    with pytest.raises(ServingError) as info:
        servable.run(servable.signature(signature), inputs, outputs)
    return info.value


def test_the_flags_choose_which_versions_are_served_from_model_tflite(
    version_dir: Path, tmp_path: Path
) -> None:
    saved_only = tmp_path / "1"
    saved_only.mkdir()
    assert PREFER.serves(version_dir) and not PREFER.serves(saved_only)
    assert not TfLiteOptions().serves(version_dir)
    assert TfLiteOptions(require=True).serves(saved_only)  # and fails to load there:
    with pytest.raises(ServingError) as info:
        TfLiteServable("m", 1, saved_only, TfLiteOptions(require=True))
    assert info.value.code == Code.NOT_FOUND
    assert info.value.message == f"{saved_only / TFLITE_FILE}; No such file or directory"
    options = ServerOptions(
        prefer_tflite_model=True, num_tflite_pools=3, tflite_num_threads=2, use_tflite_model=False
    )
    assert tflite_options(options) == TfLiteOptions(prefer=True, pools=3, num_threads=2)


def test_signatures_are_the_saved_models(both: tuple[TfLiteServable, Servable]) -> None:
    """The converter keeps each signature: keys, aliases, tensor names, types and shapes."""
    lite, saved = both
    assert sorted(lite.signatures) == ["double", "serving_default"]
    for key in lite.signatures:
        assert lite.meta_graph.signature_def[key] == saved.meta_graph.signature_def[key]


@pytest.mark.parametrize(
    ("signature", "inputs", "outputs"),
    [
        ("serving_default", {"x": np.array([1.0, 2.0, 5.0], np.float32)}, ["y"]),
        ("serving_default", {"x": np.array([], np.float32)}, ["y"]),
        ("serving_default", {"x": np.float32(-4.5)}, ["y"]),
        ("double", {"m": np.arange(8, dtype=np.float32).reshape(4, 2)}, ["z", "s"]),
        ("double", {"m": np.array([[1.5, -2.0]], np.float32)}, ["s"]),
    ],
)
def test_answers_are_the_saved_models(
    both: tuple[TfLiteServable, Servable], signature: str, inputs: dict, outputs: list[str]
) -> None:
    lite, saved = both
    got = lite.run(lite.signature(signature), inputs, outputs)
    want = saved.run(saved.signature(signature), inputs, outputs)
    assert list(got) == outputs
    for alias in outputs:
        assert got[alias].dtype == want[alias].dtype
        np.testing.assert_allclose(got[alias], want[alias], rtol=1e-6)


def test_a_version_with_model_tflite_alone_loads(tmp_path: Path) -> None:
    path = em.half_plus_three_tflite(tmp_path / "m", 7, saved_model=False) / "7"
    assert [p.name for p in path.iterdir()] == [TFLITE_FILE]
    with contextlib.closing(TfLiteServable("m", 7, path, PREFER)) as lite:
        out = lite.run(lite.signature(""), {"x": np.array([2.0], np.float32)}, ["y"])
    assert out["y"].tolist() == [4.0]


def test_bad_input_is_an_invalid_argument_and_the_interpreter_still_serves(
    version_dir: Path,
) -> None:
    with contextlib.closing(TfLiteServable("m", 1, version_dir, PREFER)) as lite:  # 1 interpreter
        wrong_type = error_of(lite, "serving_default", {"x": np.array([1, 2])}, ["y"])
        assert (wrong_type.code, wrong_type.message) == (
            Code.INVALID_ARGUMENT,
            "Expects arg[0] to be float but int64 is provided",
        )
        rank_one = error_of(lite, "double", {"m": np.array([1.0, 2.0], np.float32)}, ["s"])
        assert rank_one.code == Code.INVALID_ARGUMENT
        assert rank_one.message.startswith("TfLite: ") and "SUM" in rank_one.message
        unknown = error_of(lite, "serving_default", {"nope": np.array([1.0], np.float32)}, ["y"])
        assert (unknown.code, unknown.message) == (
            Code.INVALID_ARGUMENT,
            "Missing input TFLite tensor: nope",
        )
        with pytest.raises(ServingError) as info:
            lite.signature("nope")
        assert info.value.code == Code.FAILED_PRECONDITION
        after = lite.run(lite.signature("double"), {"m": np.ones((2, 2), np.float32)}, ["s"])
        assert after["s"].tolist() == [2.0, 2.0]


@pytest.mark.parametrize("pools", [1, 3])
def test_concurrent_runs_each_get_their_own_answer(version_dir: Path, pools: int) -> None:
    """An interpreter is not thread-safe: 6 threads x 40 runs of different batch sizes on a
    pool of `pools` interpreters, each answer checked against its own input."""
    wrong: list[str] = []
    start = threading.Barrier(6)

    with contextlib.closing(
        TfLiteServable("m", 1, version_dir, TfLiteOptions(prefer=True, pools=pools))
    ) as lite:
        signature = lite.signature("serving_default")

        def client(worker: int) -> None:
            start.wait()
            for i in range(40):
                x = np.full(1 + (worker + i) % 5, worker * 100 + i, np.float32)
                y = lite.run(signature, {"x": x}, ["y"])["y"]
                if y.shape != x.shape or not np.array_equal(y, 0.5 * x + 3):
                    wrong.append(f"worker {worker} run {i}: {y} for {x}")

        threads = [threading.Thread(target=client, args=(w,)) for w in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert wrong == []


@pytest.mark.parametrize(
    ("model", "input_tensor"),
    [
        ("saved_model_half_plus_two_tflite", "x"),
        ("saved_model_half_plus_two_tflite_with_sigdef", "tflite_input"),
    ],
)
def test_tf_servings_tflite_models(model: str, input_tensor: str) -> None:
    """As tflite_session_test.cc: serving_default x -> y, generated from the tensors or read
    from signature_defs_metadata (whose "tflite_input:0" is the tensor "tflite_input");
    x [1] runs on the [1, 1] input, resized as TF Serving resizes it."""
    with contextlib.closing(
        TfLiteServable("default", 123, TESTDATA / model / "00000123", PREFER)
    ) as lite:
        assert list(lite.signatures) == ["serving_default"]
        proto = lite.meta_graph.signature_def["serving_default"]
        assert proto.method_name == "tensorflow/serving/predict"
        assert proto.inputs["x"].name == input_tensor and proto.outputs["y"].name == "y"
        assert [d.size for d in proto.inputs["x"].tensor_shape.dim] == [1, 1]
        signature = lite.signature("serving_default")
        assert lite.run(signature, {"x": np.array([2.0], np.float32)}, ["y"])["y"].tolist() == [3.0]
        batch = lite.run(signature, {"x": np.array([[2.0], [4.0]], np.float32)}, ["y"])
        assert batch["y"].tolist() == [[3.0], [4.0]]


def test_xnnpack_and_more_threads_give_the_same_answers(
    version_dir: Path, both: tuple[TfLiteServable, Servable]
) -> None:
    """--enable_tflite_xnnpack_delegate and --tflite_num_threads change how, not what."""
    options = TfLiteOptions(prefer=True, xnnpack=True, num_threads=2)
    m = np.linspace(-3, 3, 64, dtype=np.float32).reshape(32, 2)
    want = both[1].run(both[1].signature("double"), {"m": m}, ["z", "s"])
    with contextlib.closing(TfLiteServable("m", 1, version_dir, options)) as fast:
        got = fast.run(fast.signature("double"), {"m": m}, ["z", "s"])
    for alias in ("z", "s"):
        np.testing.assert_allclose(got[alias], want[alias], rtol=1e-6)
