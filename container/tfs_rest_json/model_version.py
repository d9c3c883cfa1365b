"""TF Serving's model version numbers: non-negative int64 values (a version directory's name,
`/versions/<n>` in a REST path, `version` in a gRPC ModelSpec).

The one home of the bound, for our model server and the SageMaker layer alike (both import
this leaf; neither imports the other): the layer's custom-attribute rule and the njs fast
path's (generated from it) take at most MAX_VERSION_DIGITS digits, and every number past
MAX_MODEL_VERSION is refused where it is read.
"""

from __future__ import annotations

MAX_MODEL_VERSION = 2**63 - 1  # int64
MAX_VERSION_DIGITS = len(str(MAX_MODEL_VERSION))  # 19


def is_model_version(number: int) -> bool:
    """Whether `number` is a model version TF Serving can hold (0 to int64's largest)."""
    return 0 <= number <= MAX_MODEL_VERSION
