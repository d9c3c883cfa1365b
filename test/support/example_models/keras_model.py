"""A small Keras 3 model exported with `model.export` (format tf_saved_model)."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version

KERAS_INPUT_WIDTH = 4
KERAS_OUTPUT_WIDTH = 2


def keras_export(dest: PathLike, version: int = 1) -> Path:
    """serving_default: features float32 [None, 4] -> output_0 float32 [None, 2].

    Dense(8, relu) then Dense(2), weights from seeded initializers (deterministic).
    """
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import keras

    def init(seed: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed)

    inputs = keras.Input(shape=(KERAS_INPUT_WIDTH,), name="features", dtype="float32")
    hidden = keras.layers.Dense(8, activation="relu", kernel_initializer=init(1))(inputs)
    outputs = keras.layers.Dense(KERAS_OUTPUT_WIDTH, kernel_initializer=init(2))(hidden)
    model = keras.Model(inputs, outputs, name="small_dense")
    model.export(str(path), format="tf_saved_model", verbose=False)
