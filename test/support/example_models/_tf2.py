"""Saving a serving_default signature: of a tf.Module, or of a function calling Keras models."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_serving(module: Any, path: Path, serve: Any) -> None:
    """Save `module` to `path` with `serve` (a tf.function with an input_signature) as default."""
    import tensorflow as tf

    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})


def save_keras_serving(path: Path, serve: Any, input_signature: list[Any]) -> None:
    """Save `serve` (a function calling Keras models) as serving_default, tracking exactly the
    tf.Variables its graph reads.

    Keras 3 variables wrap tf.Variables. Saving the Keras model itself (held by a tf.Module)
    loads with tf.saved_model.load but not with the TF1 Session loader the model server uses
    ("Could not find variable": the wrapped variables are not in the TF1 graph), and Keras's
    ExportArchive saves every variable twice (wrapper and wrapped: 200 MB for ResNet-50).
    """
    import tensorflow as tf

    concrete = tf.function(serve, input_signature=input_signature).get_concrete_function()
    module = tf.Module()
    module.captured_variables = list(concrete.variables)
    tf.saved_model.save(module, str(path), signatures={"serving_default": concrete})
