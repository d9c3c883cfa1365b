"""A deliberately slow model: a tf.while_loop of matmuls, iteration count from the input.

Each iteration is a separate small step, so a Session run with a deadline
(RunOptions.timeout_in_ms) is cancelled between iterations instead of running to the end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._paths import PathLike, build_version
from ._tf2 import save_serving

_WIDTH = 128
# About 4.5 s of TF execution on a 2-core x86 VM (each iteration is a 128x128 matmul).
SLOW_MODEL_ITERATIONS = 40_000
SLOW_MODEL_EXAMPLE_INPUTS: dict[str, list] = {"iterations": [SLOW_MODEL_ITERATIONS]}


def slow_model(dest: PathLike, version: int = 1) -> Path:
    """serving_default: iterations int32 [None] -> checksum float32 [None].

    Runs max(iterations) steps of m = tanh(m @ w) and returns mean(m) for every row.
    """
    return build_version(dest, version, _write)


def _write(path: Path, seed: int = 0) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    module = tf.Module()
    module.start = tf.Variable(rng.random((_WIDTH, _WIDTH), dtype=np.float32))
    module.weights = tf.Variable(
        rng.normal(0.0, 1.0 / np.sqrt(_WIDTH), (_WIDTH, _WIDTH)).astype(np.float32)
    )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="iterations")])
    def serve(iterations: tf.Tensor) -> dict[str, tf.Tensor]:
        steps = tf.reduce_max(iterations)

        def body(i: tf.Tensor, m: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, tf.tanh(tf.matmul(m, module.weights))

        _, m = tf.while_loop(lambda i, _m: i < steps, body, (tf.constant(0), module.start))
        return {"checksum": tf.fill(tf.shape(iterations), tf.reduce_mean(m))}

    save_serving(module, path, serve)
