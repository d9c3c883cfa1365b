"""A model with two inputs of different dtypes and numeric and string outputs."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version
from ._tf2 import save_serving


def multi_io(dest: PathLike, version: int = 1) -> Path:
    """serving_default: a float32 [None, 2], b int32 [None] ->
    sum float32 [None] (a[:,0] + a[:,1] + b), b_doubled int32 [None] (2b),
    label_bytes string [None] (b as decimal text).
    """
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 2], tf.float32, name="a"),
            tf.TensorSpec([None], tf.int32, name="b"),
        ]
    )
    def serve(a: tf.Tensor, b: tf.Tensor) -> dict[str, tf.Tensor]:
        return {
            "sum": tf.reduce_sum(a, axis=1) + tf.cast(b, tf.float32),
            "b_doubled": b * 2,
            "label_bytes": tf.strings.as_string(b),
        }

    save_serving(module, path, serve)
