"""Saving a tf.Module with a serving_default signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_serving(module: Any, path: Path, serve: Any) -> None:
    """Save `module` to `path` with `serve` (a tf.function with an input_signature) as default."""
    import tensorflow as tf

    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})


def export_keras_serving(model: Any, path: Path, serve: Any, input_signature: list[Any]) -> None:
    """Save `serve` (a function calling the Keras `model`) as serving_default with Keras's
    ExportArchive, which tracks the model's variables explicitly.

    A Keras 3 model held by a tf.Module and saved with tf.saved_model.save loads with
    tf.saved_model.load but not with the TF1 Session loader (the model server's): the
    restored graph reads variables that were never created ("Could not find variable").
    """
    import keras

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve, input_signature=input_signature)
    archive.write_out(str(path), verbose=False)
