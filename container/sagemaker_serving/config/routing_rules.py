"""The routing rules of /invocations: `X-Amzn-SageMaker-Custom-Attributes` names the model
(`tfs-model-name`), its version (`tfs-model-version`) and TF Serving's method (`tfs-method`),
and what each value must look like.

The one home of these rules: the Python service reads them (service/routing.py), serve writes
them into the njs fast path's tables (launcher/nginx_config.py, for nginx/tfs.js), and the model
name rule also holds for SAGEMAKER_TFS_DEFAULT_MODEL_NAME and the models found on disk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from tfs_rest_json.model_version import MAX_VERSION_DIGITS

HEADER = "X-Amzn-SageMaker-Custom-Attributes"
MODEL_NAME = "tfs-model-name"
MODEL_VERSION = "tfs-model-version"
METHOD = "tfs-method"
# A pair, wherever it is in the header, as the AWS container scans for `tfs-[a-z-]+=[^,]+`
# (`trace=1;tfs-model-name=m` names m); spaces around `=` are allowed, an empty value is read
# (and refused: a 400 says so).
PAIR_PATTERN = re.compile(r"(tfs-[a-z-]+)\s*=([^,]*)")

# Patterns in the syntax Python and JavaScript share (matched whole on both paths).
MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
MODEL_NAME_RULE = (
    "letters, digits, '.', '_', '-', starting with a letter or digit, at most 255 characters"
)
MODEL_VERSION_PATTERN = re.compile(rf"[0-9]{{1,{MAX_VERSION_DIGITS}}}")  # an int64's digits

# tfs-method: TF Serving's methods, each with the request key of its list of records.
METHODS: Mapping[str, str] = MappingProxyType(
    {"predict": "instances", "classify": "examples", "regress": "examples"}
)
DEFAULT_METHOD = "predict"

# What a bad value should have been, in the 400 answer's words.
EXPECTED: Mapping[str, str] = MappingProxyType(
    {
        MODEL_NAME: 'letters, digits, ".", "_" or "-"',
        MODEL_VERSION: "a non-negative integer",
        METHOD: f"{', '.join(list(METHODS)[:-1])} or {list(METHODS)[-1]}",
    }
)
