"""A model whose outputs hold every kind of value an answer format must carry."""

from __future__ import annotations

from pathlib import Path

from ._paths import PathLike, build_version


def output_formats(dest: PathLike, version: int = 1) -> Path:
    """x float32 [None] -> (serving_default) f32 = x/3 (float32, 9 digits), f64 = x/3
    (float64, 17 digits), i64 = x + 2**53 + 1 (int64 beyond a double's integers), ratio = x/0
    (NaN, Infinity, -Infinity), flag = x > 0 (bool), text = 'x=<x>, "q"' + LF (string: comma,
    quote, newline), raw_bytes = x as text (a `_bytes` output: base64). Other signatures, each
    with one output: `text` (text), `bytes` (raw_bytes), `grid` (float32 [None, 2, 2]:
    [[x, -x], [x/3, 0]])."""
    return build_version(dest, version, _write)


def _write(path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()
    spec = [tf.TensorSpec([None], tf.float32, name="x")]

    def text_of(x: tf.Tensor) -> tf.Tensor:
        return tf.strings.join(["x=", tf.strings.as_string(x, precision=1), ', "q"\n'])

    @tf.function(input_signature=spec)
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {
            "f32": x / 3.0,
            "f64": tf.cast(x, tf.float64) / 3.0,
            "i64": tf.cast(x, tf.int64) + (2**53 + 1),
            "ratio": tf.math.divide(x, tf.zeros_like(x)),
            "flag": x > 0,
            "text": text_of(x),
            "raw_bytes": tf.strings.as_string(x, precision=1),
        }

    @tf.function(input_signature=spec)
    def text(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"text": text_of(x)}

    @tf.function(input_signature=spec)
    def raw(x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"raw_bytes": tf.strings.as_string(x, precision=1)}

    @tf.function(input_signature=spec)
    def grid(x: tf.Tensor) -> dict[str, tf.Tensor]:
        rows = [tf.stack([x, -x], axis=1), tf.stack([x / 3.0, tf.zeros_like(x)], axis=1)]
        return {"grid": tf.stack(rows, axis=1)}

    signatures = {"serving_default": serve, "text": text, "bytes": raw, "grid": grid}
    tf.saved_model.save(module, str(path), signatures=signatures)
