"""A TensorFlow Serving-compatible model server on the TensorFlow Python runtime."""

__version__ = "0.1.0"
