"""Saving a tf.Module with a serving_default signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_serving(module: Any, path: Path, serve: Any) -> None:
    """Save `module` to `path` with `serve` (a tf.function with an input_signature) as default."""
    import tensorflow as tf

    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
