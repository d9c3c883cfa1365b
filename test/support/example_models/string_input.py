"""A model with a string input."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version
from ._tf2 import save_serving


def string_input(dest: PathLike, version: int = 1) -> Path:
    """serving_default: text string [None] -> length int32 [None] (bytes per string)."""
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"length": tf.strings.length(text)}

    save_serving(module, path, serve)


def example_input(dest: PathLike, version: int = 1) -> Path:
    """serving_default: serialized tf.Example [None] (float feature `x`) -> y = 0.5 * x + 2."""
    return build_version(dest, version, _write_example_input)


def _write_example_input(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()
    features = {"x": tf.io.FixedLenFeature([1], tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        x = tf.io.parse_example(examples, features)["x"]
        return {"y": 0.5 * x + 2.0}

    save_serving(module, path, serve)
