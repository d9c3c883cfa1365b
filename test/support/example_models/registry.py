"""The example models by CLI name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ._paths import PathLike
from .conv import conv_model
from .formats import output_formats
from .half_plus_two import half_plus_three_tf1, half_plus_two_tf1
from .half_plus_two_tf2 import half_plus_two_tf2
from .image_classifier import digits_classifier, resnet50_classifier
from .keras_model import keras_export
from .multi_io import multi_io
from .slow import slow_model
from .string_input import example_input, string_input
from .variable_length import variable_length

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


@dataclass(frozen=True)
class ExampleModel:
    """A named builder: `build(dest, version)` writes one version (None: its default ones)."""

    name: str
    summary: str
    build: Callable[[PathLike, int | None], Path]


def _half_plus_three(dest: PathLike, version: int | None = None) -> Path:
    if version is None:
        return half_plus_three_tf1(dest)
    return half_plus_three_tf1(dest, versions=(version,))


# (name, summary, builder(dest) or builder(dest, version=N))
_BUILDERS: tuple[tuple[str, str, Callable[..., Path]], ...] = (
    ("half_plus_two", "TF1 graph, TF Serving's test model: y = 0.5x + 2 (version 123)",
     half_plus_two_tf1),
    ("half_plus_three", "TF1 graph: y = 0.5x + 3 (versions 123 and 124)", _half_plus_three),
    ("half_plus_two_tf2", "tf.Module: y = 0.5x + 2", half_plus_two_tf2),
    ("keras", "Keras 3 model.export: [None, 4] -> [None, 2]", keras_export),
    ("multi_io", "inputs a, b; outputs sum, b_doubled, label_bytes", multi_io),
    ("string_input", "text -> length", string_input),
    ("example_input", "serialized tf.Example (x) -> y = 0.5x + 2", example_input),
    ("formats", "x -> float32, float64, int64, NaN/Infinity, bool, text and _bytes outputs",
     output_formats),
    ("variable_length", "x [None, None] -> total (row sums)", variable_length),
    ("conv", "small conv net on 64x64x3 images (batching benchmark)", conv_model),
    ("slow", "while_loop of matmuls taking seconds", slow_model),
    ("digits", "CNN trained on sklearn digits as 32x32 JPEGs: image_bytes -> probabilities, "
     "classes", digits_classifier),
    ("resnet50", "ResNet-50, random weights, 224x224: image_bytes -> probabilities, classes "
     "(~100 MB)", resnet50_classifier),
)  # fmt: skip


def _versioned(builder: Callable[..., Path]) -> Callable[[PathLike, int | None], Path]:
    def build(dest: PathLike, version: int | None) -> Path:
        return builder(dest) if version is None else builder(dest, version=version)

    return build


MODELS: dict[str, ExampleModel] = {
    name: ExampleModel(name, summary, _versioned(builder)) for name, summary, builder in _BUILDERS
}


def build_models(root: PathLike, folders: Mapping[str, str]) -> Path:
    """Example models side by side: `root/<folder>` for each {folder: model name}, each with
    the model's default versions; returns `root`."""
    root = Path(root)
    for folder, name in folders.items():
        MODELS[name].build(root / folder, None)
    return root


def ensure_built(name: str, dest: PathLike, version: int = 1) -> Path:
    """Build model `name` as `dest/<version>/` unless a SavedModel is already there; return `dest`.

    A cache for slow builders (digits trains, resnet50 writes ~100 MB); delete the version
    directory to rebuild after changing a builder.
    """
    dest = Path(dest)
    if not any((dest / str(version) / f).is_file() for f in SAVED_MODEL_FILES):
        MODELS[name].build(dest, version)
    return dest
