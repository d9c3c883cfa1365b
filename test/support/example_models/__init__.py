"""Builders of the example and test SavedModels (TF Serving's classic test models and more).

Every builder writes `dest/<version>/` (creating parents, replacing that version if present,
published with a rename so a polling server never sees it half-written) and returns `dest`.
TensorFlow is imported only when a model is built.
"""

from .conv import CONV_CLASSES, CONV_INPUT_SHAPE, conv_example_batch, conv_model
from .formats import output_formats
from .half_plus_two import half_plus_three_tf1, half_plus_two_tf1
from .half_plus_two_tf2 import half_plus_two_tf2
from .image_classifier import (
    DIGITS_CLASSES,
    DIGITS_IMAGE_SIZE,
    RESNET50_CLASSES,
    RESNET50_IMAGE_SIZE,
    digits_classifier,
    digits_test_set,
    render_digit_jpeg,
    resnet50_classifier,
)
from .keras_model import KERAS_INPUT_WIDTH, KERAS_OUTPUT_WIDTH, keras_export
from .multi_io import multi_io
from .registry import MODELS, build_models, ensure_built
from .slow import SLOW_MODEL_EXAMPLE_INPUTS, SLOW_MODEL_ITERATIONS, slow_model
from .string_input import example_input, string_input
from .tflite import half_plus_three_tflite
from .variable_length import variable_length
from .warmup import WARMUP_DIR, WARMUP_FILENAME, predict_log, write_warmup_requests

__all__ = [
    "CONV_CLASSES",
    "CONV_INPUT_SHAPE",
    "DIGITS_CLASSES",
    "DIGITS_IMAGE_SIZE",
    "KERAS_INPUT_WIDTH",
    "KERAS_OUTPUT_WIDTH",
    "MODELS",
    "RESNET50_CLASSES",
    "RESNET50_IMAGE_SIZE",
    "SLOW_MODEL_EXAMPLE_INPUTS",
    "SLOW_MODEL_ITERATIONS",
    "WARMUP_DIR",
    "WARMUP_FILENAME",
    "build_models",
    "conv_example_batch",
    "conv_model",
    "digits_classifier",
    "digits_test_set",
    "ensure_built",
    "example_input",
    "half_plus_three_tf1",
    "half_plus_three_tflite",
    "half_plus_two_tf1",
    "half_plus_two_tf2",
    "keras_export",
    "multi_io",
    "output_formats",
    "predict_log",
    "render_digit_jpeg",
    "resnet50_classifier",
    "slow_model",
    "string_input",
    "variable_length",
    "write_warmup_requests",
]
