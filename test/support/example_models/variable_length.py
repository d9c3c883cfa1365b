"""A model with a variable-length second dimension (exercises batch padding)."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version
from ._tf2 import save_serving


def variable_length(dest: PathLike, version: int = 1) -> Path:
    """serving_default: x float32 [None, None] -> total float32 [None] (row sums)."""
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name="x")])
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"total": tf.reduce_sum(x, axis=1)}

    save_serving(module, path, serve)
