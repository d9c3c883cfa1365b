"""TF2 half_plus_two: a tf.Module saved with tf.saved_model.save."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version
from ._tf2 import save_serving


def half_plus_two_tf2(dest: PathLike, version: int = 1) -> Path:
    """serving_default: x float32 [None] -> y float32 [None], y = 0.5x + 2."""
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()
    module.a = tf.Variable(0.5, name="a")
    module.b = tf.Variable(2.0, name="b")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"y": module.a * x + module.b}

    save_serving(module, path, serve)
