"""Image classifiers whose serving signature takes raw JPEG bytes and decodes them in the graph.

Both models answer `serving_default` with

    image_bytes  string  [None]        raw JPEG bytes (REST clients send {"b64": "..."})
    -> probabilities  float32 [None, C]
       classes        int64   [None]   argmax of probabilities

Each image is decoded (tf.io.decode_jpeg, 3 channels), resized to the model's input size and
scaled inside the graph, so a client or an `inference.py` only has to forward the file's bytes.

- `resnet50_classifier`: Keras ResNet-50 with random weights (ImageNet weights cannot be
  downloaded here), 224x224, 1000 classes; ~100 MB on disk. For throughput, not accuracy.
- `digits_classifier`: a small CNN trained at build time on scikit-learn's `load_digits`
  rendered as 32x32 JPEGs (`render_digit_jpeg`). Training decodes the renders with the graph's
  own decode path, so training and serving see the same pixels. `digits_test_set()` is the
  held-out split (the last 20 % after a fixed shuffle), never seen in training.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import PathLike, build_version
from ._quiet import quiet_tf
from ._tf2 import save_keras_serving

DIGITS_IMAGE_SIZE = 32
DIGITS_CLASSES = 10
DIGITS_TEST_FRACTION = 0.2
RESNET50_IMAGE_SIZE = 224
RESNET50_CLASSES = 1000

_DIGITS_SHUFFLE_SEED = 0
_DIGITS_TRAIN_SEED = 1
_DIGITS_EPOCHS = 12
_DIGITS_BATCH = 32
# Keras ResNet-50's own ("caffe") preprocessing: RGB -> BGR, minus the ImageNet channel means.
_CAFFE_BGR_MEANS = (103.939, 116.779, 123.68)


def render_digit_jpeg(pixels_8x8: Any, size: int = DIGITS_IMAGE_SIZE) -> bytes:
    """JPEG bytes (RGB, quality 95) of one `load_digits` image (8x8, values 0..16), upsampled
    bilinearly to `size` x `size`; ink is bright on a black background, as in the data set."""
    from PIL import Image

    pixels = np.asarray(pixels_8x8, dtype=np.float64).reshape(8, 8)
    gray = np.clip(np.rint(pixels * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    image = Image.fromarray(gray).resize((size, size), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.convert("RGB").save(out, format="JPEG", quality=95)
    return out.getvalue()


@functools.cache
def _digits_split() -> tuple[tuple[tuple[bytes, int], ...], tuple[tuple[bytes, int], ...]]:
    """(train, test) tuples of (jpeg, label): every digit rendered, shuffled with a fixed seed,
    the last DIGITS_TEST_FRACTION held out."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(_DIGITS_SHUFFLE_SEED).permutation(len(digits.target))
    rendered = tuple((render_digit_jpeg(digits.images[i]), int(digits.target[i])) for i in order)
    n_test = round(len(rendered) * DIGITS_TEST_FRACTION)
    return rendered[:-n_test], rendered[-n_test:]


def digits_test_set() -> list[tuple[bytes, int]]:
    """The held-out digits as (jpeg bytes, label), in a fixed order (359 of the 1797)."""
    return list(_digits_split()[1])


def decode_images(image_bytes: Any, size: int) -> Any:
    """tf graph: JPEG bytes [N] -> float32 [N, size, size, 3], RGB in 0..255."""
    import tensorflow as tf

    def decode(data: tf.Tensor) -> tf.Tensor:
        image = tf.io.decode_jpeg(data, channels=3)
        return tf.image.resize(image, [size, size], method="bilinear")

    return tf.map_fn(
        decode, image_bytes, fn_output_signature=tf.TensorSpec([size, size, 3], tf.float32)
    )


def digits_classifier(dest: PathLike, version: int = 1) -> Path:
    """serving_default: image_bytes string [None] (32x32 digit JPEGs) -> probabilities
    float32 [None, 10], classes int64 [None]. Trains a small CNN first (~10-30 s on 2 cores)."""
    return build_version(dest, version, _write_digits)


def resnet50_classifier(dest: PathLike, version: int = 1) -> Path:
    """serving_default: image_bytes string [None] (any JPEG, resized to 224x224) ->
    probabilities float32 [None, 1000], classes int64 [None]. Random weights; ~100 MB."""
    return build_version(dest, version, _write_resnet50)


def _save_classifier(model: Any, path: Path, size: int, preprocess: Callable[[Any], Any]) -> None:
    """Save `model` (a Keras model taking [N, size, size, 3]) behind a JPEG-bytes signature."""
    import tensorflow as tf

    def serve(image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
        images = preprocess(decode_images(image_bytes, size))
        probabilities = model(images, training=False)
        return {"probabilities": probabilities, "classes": tf.argmax(probabilities, axis=1)}

    spec = tf.TensorSpec([None], tf.string, name="image_bytes")
    with quiet_tf():
        save_keras_serving(path, serve, [spec])


def _scale_unit(images: Any) -> Any:
    return images / 255.0


def _caffe_preprocess(images: Any) -> Any:
    return images[..., ::-1] - np.asarray(_CAFFE_BGR_MEANS, np.float32)


def _write_resnet50(path: Path) -> None:
    import keras

    model = keras.applications.ResNet50(
        weights=None,
        classes=RESNET50_CLASSES,
        input_shape=(RESNET50_IMAGE_SIZE, RESNET50_IMAGE_SIZE, 3),
    )
    _save_classifier(model, path, RESNET50_IMAGE_SIZE, _caffe_preprocess)


def _decoded(samples: Sequence[tuple[bytes, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Training arrays through the serving decode path: images [N, 32, 32, 3] in 0..1, labels."""
    import tensorflow as tf

    images = decode_images(tf.constant([jpeg for jpeg, _ in samples]), DIGITS_IMAGE_SIZE)
    labels = np.array([label for _, label in samples], np.int64)
    return _scale_unit(images).numpy(), labels


def _digits_cnn(seed: int) -> Any:
    import keras
    from keras import layers

    def init(offset: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed + offset)

    size = DIGITS_IMAGE_SIZE
    return keras.Sequential(
        [
            keras.Input((size, size, 3), name="image"),
            layers.Conv2D(16, 3, padding="same", activation="relu", kernel_initializer=init(1)),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu", kernel_initializer=init(2)),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu", kernel_initializer=init(3)),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dropout(0.3, seed=seed + 4),
            layers.Dense(64, activation="relu", kernel_initializer=init(5)),
            layers.Dense(DIGITS_CLASSES, activation="softmax", kernel_initializer=init(6)),
        ],
        name="digits_cnn",
    )


def _write_digits(path: Path) -> None:
    import keras
    import tensorflow as tf

    train, _test = _digits_split()
    images, labels = _decoded(train)
    model = _digits_cnn(_DIGITS_TRAIN_SEED)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    batches = (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(len(labels), seed=_DIGITS_TRAIN_SEED, reshuffle_each_iteration=True)
        .batch(_DIGITS_BATCH)
    )
    model.fit(batches, epochs=_DIGITS_EPOCHS, shuffle=False, verbose=0)  # shuffled above
    _save_classifier(model, path, DIGITS_IMAGE_SIZE, _scale_unit)
