"""Response bodies of TF Serving's REST API: predict, classify, regress and error JSON.

The predict layout and the number text live in tfs_rest_json (shared with the SageMaker
service's gRPC tensor path, which has to write the same bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tfs_model_server.errors import invalid_argument
from tfs_rest_json import TensorJsonError
from tfs_rest_json import decimal as _decimal
from tfs_rest_json import float32_joined as _float32_joined
from tfs_rest_json import json_string as _json_string
from tfs_rest_json import predict_response as _predict_response
from tfs_rest_json import utf8 as _utf8


def predict_response(outputs: Mapping[str, np.ndarray], row_format: bool) -> bytes:
    """MakeJsonFromTensors(): {"predictions": ...} (row) or {"outputs": ...} (columnar)."""
    try:
        return _predict_response(outputs, row_format)
    except TensorJsonError as err:
        raise invalid_argument(str(err)) from None


def classify_response(results: Sequence[Sequence[tuple[bytes | str, float]]]) -> bytes:
    """MakeJsonFromClassificationResult(): {"results": [[[label, score], ...], ...]}."""
    if not results:
        raise invalid_argument("Cannot convert empty ClassificationResults to JSON")
    rows = [
        "["
        + ", ".join(
            f"[{_json_string(label)}, {_decimal(float(np.float32(score)), True)}]"
            for label, score in classes
        )
        + "]"
        for classes in results
    ]
    return _utf8('{\n    "results": [' + ", ".join(rows) + "\n    ]\n}")


def regress_response(values: Sequence[float]) -> bytes:
    """MakeJsonFromRegressionResult(): {"results": [v1, v2, ...]}."""
    if not len(values):
        raise invalid_argument("Cannot convert empty RegressionResults to JSON")
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    return _utf8('{\n    "results": [' + _float32_joined(flat, flat.size, ", ")[0] + "]\n}")


MAX_ERROR_CHARS = 4096  # an error text is cut there: it never echoes a whole request


def error_body(message: str) -> bytes:
    """MakeJsonFromStatus(): {"error": message}, at most MAX_ERROR_CHARS of it."""
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + f"... ({len(message) - MAX_ERROR_CHARS} more)"
    return _utf8('{\n    "error": ' + _json_string(message) + "\n}")
