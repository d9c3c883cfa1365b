"""example_models: every builder writes a SavedModel the TF1 Session loader can run."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import example_models as em  # noqa: E402
from example_models.__main__ import main as cli_main  # noqa: E402

PREDICT = "tensorflow/serving/predict"
REGRESS = "tensorflow/serving/regress"
CLASSIFY = "tensorflow/serving/classify"


@contextmanager
def loaded(path: Path) -> Iterator[tuple[object, object]]:
    """(session, meta_graph) for the SavedModel at `path`, loaded as the server does."""
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as sess:
        with graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(sess, ["serve"], str(path))
        yield sess, meta_graph


def run(
    path: Path, inputs: Mapping[str, object], signature: str = "serving_default"
) -> dict[str, np.ndarray]:
    """Run a signature by its tensor names; inputs and outputs keyed by alias."""
    with loaded(path) as (sess, meta_graph):
        sig = meta_graph.signature_def[signature]
        assert set(inputs) == set(sig.inputs)
        feeds = {sig.inputs[alias].name: value for alias, value in inputs.items()}
        aliases = sorted(sig.outputs)
        values = sess.run([sig.outputs[a].name for a in aliases], feeds)
        return dict(zip(aliases, values, strict=True))


def describe(path: Path, signature: str = "serving_default") -> dict[str, object]:
    """Method name and {alias: (tensor name, dtype, dims)} of a signature."""
    with loaded(path) as (_sess, meta_graph):
        sig = meta_graph.signature_def[signature]

    def info(tensors) -> dict[str, tuple[str, str, list[int]]]:
        return {
            alias: (t.name, tf.dtypes.as_dtype(t.dtype).name, [d.size for d in t.tensor_shape.dim])
            for alias, t in tensors.items()
        }

    return {"method": sig.method_name, "inputs": info(sig.inputs), "outputs": info(sig.outputs)}


def example(**features: float) -> bytes:
    feature = {
        k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) for k, v in features.items()
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def slow_builds(tmp_path_factory) -> Path:
    """The conv and slow models (the others come from the session's model_root, conftest.py)."""
    root = tmp_path_factory.mktemp("example_models")
    assert em.conv_model(root / "conv") == root / "conv"
    em.slow_model(root / "slow")
    return root


def test_import_is_cheap():
    code = "import sys, example_models; assert 'tensorflow' not in sys.modules, 'tf imported'"
    support = str(Path(__file__).resolve().parents[2] / "support")
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": support}
    )


def test_half_plus_two_signatures_match_tf_serving_testdata(model_root):
    path = model_root / "half_plus_two" / "123"
    example_in = ("tf_example:0", "string", [-1])
    expected = {
        "serving_default": (PREDICT, {"x": ("x:0", "float32", [-1, 1])}, {"y": "y:0"}),
        "regress_x_to_y": (REGRESS, {"inputs": example_in}, {"outputs": "y:0"}),
        "regress_x_to_y2": (REGRESS, {"inputs": example_in}, {"outputs": "y2:0"}),
        "regress_x2_to_y3": (
            REGRESS,
            {"inputs": ("x2:0", "float32", [-1, 1])},
            {"outputs": "y3:0"},
        ),
        "classify_x_to_y": (CLASSIFY, {"inputs": example_in}, {"scores": "y:0"}),
    }
    with loaded(path) as (_sess, meta_graph):
        assert set(meta_graph.signature_def) == set(expected)
        assert list(meta_graph.meta_info_def.tags) == ["serve"]
    for key, (method, inputs, outputs) in expected.items():
        sig = describe(path, key)
        assert sig["method"] == method
        assert sig["inputs"] == inputs
        assert {a: (name, "float32", [-1, 1]) for a, name in outputs.items()} == sig["outputs"]


def test_half_plus_two_runs_every_signature(model_root):
    path = model_root / "half_plus_two" / "123"
    x = np.array([[1.0], [2.0], [5.0]], np.float32)
    np.testing.assert_allclose(run(path, {"x": x})["y"], [[2.5], [3.0], [4.5]])
    records = [example(x=4.0), example(x=1.0, x2=2.0)]
    np.testing.assert_allclose(
        run(path, {"inputs": records}, "regress_x_to_y")["outputs"], [[4], [2.5]]
    )
    np.testing.assert_allclose(
        run(path, {"inputs": records}, "regress_x_to_y2")["outputs"], [[5], [3.5]]
    )
    np.testing.assert_allclose(
        run(path, {"inputs": records}, "classify_x_to_y")["scores"], [[4], [2.5]]
    )
    x2 = np.array([[2.0]], np.float32)
    np.testing.assert_allclose(run(path, {"inputs": x2}, "regress_x2_to_y3")["outputs"], [[4.0]])


def test_half_plus_two_asset_and_main_op(model_root):
    path = model_root / "half_plus_two" / "123"
    assert (path / "assets" / "foo.txt").read_text() == "asset-file-contents"
    with loaded(path) as (sess, meta_graph):
        assert sess.run("filename_tensor:0") == b"foo.txt"
        assert "saved_model_main_op" in meta_graph.collection_def


def test_half_plus_three_versions(model_root):
    assert sorted(p.name for p in (model_root / "half_plus_three").iterdir()) == ["123", "124"]
    for version in ("123", "124"):
        y = run(model_root / "half_plus_three" / version, {"x": np.array([[1.0]], np.float32)})["y"]
        np.testing.assert_allclose(y, [[3.5]])


def test_dest_keeps_other_versions_and_replaces_same(tmp_path):
    em.half_plus_three_tf1(tmp_path, versions=(1,))
    em.half_plus_two_tf1(tmp_path, version=2)
    em.half_plus_two_tf1(tmp_path, version=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2"]
    np.testing.assert_allclose(
        run(tmp_path / "1", {"x": np.array([[1.0]], np.float32)})["y"], [[2.5]]
    )


def test_half_plus_two_tf2(model_root):
    sig = describe(model_root / "half_plus_two_tf2" / "1")
    assert sig["method"] == PREDICT
    assert sig["inputs"]["x"][1:] == ("float32", [-1])
    assert sig["outputs"]["y"][1:] == ("float32", [-1])
    y = run(model_root / "half_plus_two_tf2" / "1", {"x": np.array([1.0, 2.0], np.float32)})["y"]
    np.testing.assert_allclose(y, [2.5, 3.0])


def test_multi_io(model_root):
    path = model_root / "multi_io" / "1"
    sig = describe(path)
    assert {a: v[1:] for a, v in sig["inputs"].items()} == {
        "a": ("float32", [-1, 2]),
        "b": ("int32", [-1]),
    }
    assert {a: v[1:] for a, v in sig["outputs"].items()} == {
        "sum": ("float32", [-1]),
        "b_doubled": ("int32", [-1]),
        "label_bytes": ("string", [-1]),
    }
    out = run(path, {"a": np.array([[1, 2], [3, 4]], np.float32), "b": np.array([3, 5], np.int32)})
    np.testing.assert_allclose(out["sum"], [6.0, 12.0])
    assert out["b_doubled"].tolist() == [6, 10]
    assert out["label_bytes"].tolist() == [b"3", b"5"]


def test_string_input(model_root):
    path = model_root / "string_input" / "1"
    assert describe(path)["inputs"]["text"][1:] == ("string", [-1])
    out = run(path, {"text": np.array([b"hello", b"", "é".encode()], object)})
    assert out["length"].tolist() == [5, 0, 2]
    assert out["length"].dtype == np.int32


def test_variable_length(model_root):
    path = model_root / "variable_length" / "1"
    assert describe(path)["inputs"]["x"][1:] == ("float32", [-1, -1])
    out = run(path, {"x": np.array([[1, 2, 3], [4, 0, 0]], np.float32)})
    np.testing.assert_allclose(out["total"], [6.0, 4.0])


def test_keras_export_is_deterministic(model_root, tmp_path):
    path = model_root / "keras" / "1"
    sig = describe(path)
    ((alias, (_name, dtype, dims)),) = sig["inputs"].items()
    assert (dtype, dims) == ("float32", [-1, em.KERAS_INPUT_WIDTH])
    features = np.full((3, em.KERAS_INPUT_WIDTH), 0.5, np.float32)
    first = run(path, {alias: features})
    ((out,),) = [list(first.values())]
    assert out.shape == (3, em.KERAS_OUTPUT_WIDTH)
    em.keras_export(tmp_path, version=1)
    np.testing.assert_array_equal(run(tmp_path / "1", {alias: features})[next(iter(first))], out)


def test_conv_model_shapes(slow_builds):
    path = slow_builds / "conv" / "1"
    sig = describe(path)
    assert sig["inputs"]["image"][1:] == ("float32", [-1, *em.CONV_INPUT_SHAPE])
    assert sig["outputs"]["probabilities"][1:] == ("float32", [-1, em.CONV_CLASSES])
    batch = em.conv_example_batch(3)
    assert batch.shape == (3, *em.CONV_INPUT_SHAPE) and batch.dtype == np.float32
    np.testing.assert_array_equal(batch, em.conv_example_batch(3))
    probs = run(path, {"image": batch})["probabilities"]
    assert probs.shape == (3, em.CONV_CLASSES)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert np.isfinite(probs).all() and np.abs(probs[0] - probs[1]).max() > 1e-4
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert size < 20e6


def test_slow_model_small_input(slow_builds):
    path = slow_builds / "slow" / "1"
    sig = describe(path)
    assert set(sig["inputs"]) == set(em.SLOW_MODEL_EXAMPLE_INPUTS)
    assert sig["inputs"]["iterations"][1:] == ("int32", [-1])
    out = run(path, {"iterations": np.array([5, 2], np.int32)})["checksum"]
    assert out.shape == (2,) and np.isfinite(out).all()


def test_warmup_records_round_trip(tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    logs = [
        em.predict_log("m", {"x": np.array([[1.0]], np.float32)}),
        em.predict_log("m", {"text": np.array([b"a"])}, signature_name="other"),
    ]
    path = em.write_warmup_requests(tmp_path / "1", logs)
    assert path == tmp_path / "1" / "assets.extra" / "tf_serving_warmup_requests"
    records = [bytes(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
    parsed = [prediction_log_pb2.PredictionLog.FromString(r) for r in records]
    assert parsed == logs
    request = parsed[0].predict_log.request
    assert request.model_spec.name == "m"
    assert request.model_spec.signature_name == "serving_default"
    np.testing.assert_array_equal(tf.make_ndarray(request.inputs["x"]), [[1.0]])
    assert parsed[1].predict_log.request.model_spec.signature_name == "other"


def test_cli_list_and_build(tmp_path, capsys):
    assert cli_main(["--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == [
        "half_plus_two",
        "half_plus_three",
        "half_plus_two_tf2",
        "keras",
        "multi_io",
        "string_input",
        "example_input",
        "formats",
        "variable_length",
        "conv",
        "slow",
        "digits",
        "resnet50",
    ]
    assert cli_main(["string_input", str(tmp_path / "s"), "--version", "7"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "s")
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["7"]
    with pytest.raises(SystemExit):
        cli_main(["nope", str(tmp_path)])


def test_ensure_built_builds_once(tmp_path):
    dest = em.ensure_built("string_input", tmp_path / "s", version=3)
    assert dest == tmp_path / "s"
    pb = dest / "3" / "saved_model.pb"
    stamp = pb.stat().st_mtime_ns
    assert em.ensure_built("string_input", dest, version=3) == dest
    assert pb.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in dest.iterdir()) == ["3"]


# ----- image classifiers: JPEG bytes in, decoded in the graph ----------------------------------


def image_signature(path: Path, classes: int) -> None:
    sig = describe(path)
    assert sig["method"] == PREDICT
    assert {a: v[1:] for a, v in sig["inputs"].items()} == {"image_bytes": ("string", [-1])}
    assert {a: v[1:] for a, v in sig["outputs"].items()} == {
        "probabilities": ("float32", [-1, classes]),
        "classes": ("int64", [-1]),
    }


def test_render_digit_jpeg():
    from PIL import Image

    pixels = np.zeros((8, 8))
    pixels[2:6, 3:5] = 16
    jpeg = em.render_digit_jpeg(pixels)
    assert jpeg[:2] == b"\xff\xd8" and jpeg == em.render_digit_jpeg(pixels.ravel())
    image = Image.open(io.BytesIO(jpeg))
    assert (image.format, image.mode, image.size) == ("JPEG", "RGB", (32, 32))
    gray = np.asarray(image.convert("L"), np.float64)
    assert gray[12:20, 14:18].mean() > 200 and gray[:6].mean() < 10
    assert Image.open(io.BytesIO(em.render_digit_jpeg(pixels, size=64))).size == (64, 64)


def test_digits_test_set_is_fixed():
    test_set = em.digits_test_set()
    assert len(test_set) == 359  # the last 20 % of load_digits' 1797 images
    assert test_set == em.digits_test_set()
    assert {label for _, label in test_set} == set(range(em.DIGITS_CLASSES))
    assert all(jpeg[:2] == b"\xff\xd8" for jpeg, _ in test_set)


@pytest.mark.slow
def test_digits_classifier_accuracy_through_the_signature(digits_model):
    path = digits_model / "1"
    image_signature(path, em.DIGITS_CLASSES)
    jpegs = np.array([jpeg for jpeg, _ in em.digits_test_set()], object)
    labels = np.array([label for _, label in em.digits_test_set()])
    # As the model server runs it (TF1 Session over the MetaGraph) ...
    out = run(path, {"image_bytes": jpegs})
    assert out["probabilities"].shape == (len(labels), em.DIGITS_CLASSES)
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["classes"], out["probabilities"].argmax(axis=1))
    accuracy = (out["classes"] == labels).mean()
    assert accuracy >= 0.97, f"held-out accuracy {accuracy:.2%}"
    # ... and through the TF2 signature, with the same answers.
    signature = tf.saved_model.load(str(path)).signatures["serving_default"]
    tf2 = signature(image_bytes=tf.constant(jpegs.tolist()))
    np.testing.assert_array_equal(tf2["classes"].numpy(), out["classes"])
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert size < 5e6


@pytest.mark.slow
def test_resnet50_classifier_on_sample_photos(tmp_path):
    from PIL import Image
    from skimage import data

    started = time.monotonic()
    path = em.resnet50_classifier(tmp_path / "resnet50") / "1"
    build_seconds = time.monotonic() - started
    assert build_seconds < 60, f"resnet50 took {build_seconds:.0f} s to build"
    image_signature(path, em.RESNET50_CLASSES)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert 90e6 < size < 120e6  # 25.6 M float32 weights, each saved once

    def jpeg(pixels: np.ndarray) -> bytes:
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="JPEG", quality=90)
        return out.getvalue()

    # Photos of different sizes, one grayscale, in one batch: each is decoded to RGB and resized
    # in the graph.
    photos = np.array([jpeg(data.astronaut()), jpeg(data.camera()), jpeg(data.coffee())], object)
    out = run(path, {"image_bytes": photos})
    assert out["probabilities"].shape == (3, em.RESNET50_CLASSES)
    assert np.isfinite(out["probabilities"]).all()
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-4)
    assert out["classes"].dtype == np.int64
    np.testing.assert_array_equal(out["classes"], out["probabilities"].argmax(axis=1))
