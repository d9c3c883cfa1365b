"""half_plus_three as a TF2 SavedModel with its TFLite conversion (model.tflite) beside it."""

from __future__ import annotations

import shutil
from pathlib import Path

from ._paths import PathLike, build_version

TFLITE_FILE = "model.tflite"


def half_plus_three_tflite(dest: PathLike, version: int = 1, *, saved_model: bool = True) -> Path:
    """Two signatures, converted with TFLiteConverter.from_saved_model into model.tflite:
    serving_default: x float32 [None] -> y = 0.5x + 3;
    double: m float32 [None, 2] -> z = 2m, s = the sum of each row of m.
    Without saved_model, the version holds model.tflite alone."""

    def write(path: Path) -> None:
        _write(path)
        if not saved_model:
            for child in path.iterdir():
                if child.name != TFLITE_FILE:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()

    return build_version(dest, version, write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()
    module.a = tf.Variable(0.5, name="a")
    module.b = tf.Variable(3.0, name="b")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"y": module.a * x + module.b}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="m")])
    def double(m: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"z": m * 2.0, "s": tf.reduce_sum(m, axis=1)}

    tf.saved_model.save(module, str(path), signatures={"serving_default": serve, "double": double})
    model = tf.lite.TFLiteConverter.from_saved_model(str(path)).convert()
    (path / TFLITE_FILE).write_bytes(model)


__all__ = ["half_plus_three_tflite"]
