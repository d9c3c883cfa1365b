"""`X-Amzn-SageMaker-Custom-Attributes` routing: model name, version and method, validated."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sagemaker_serving.config.settings import MODEL_NAME_PATTERN
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.media import client_text

VERSION = re.compile(r"[0-9]{1,19}")
METHODS = ("predict", "classify", "regress")


@dataclass(frozen=True)
class Route:
    """Where a request goes; the *_given fields are what the header said (None if absent)."""

    model: str
    version: str | None = None
    method: str = "predict"
    model_given: str | None = None
    method_given: str | None = None

    def path(self) -> str:
        """The model server REST path, e.g. /v1/models/m/versions/2:predict."""
        version = f"/versions/{self.version}" if self.version else ""
        return f"/v1/models/{self.model}{version}:{self.method}"


_RULES: dict[str, tuple[Callable[[str], object], str]] = {
    "tfs-model-name": (MODEL_NAME_PATTERN.fullmatch, 'letters, digits, ".", "_" or "-"'),
    "tfs-model-version": (VERSION.fullmatch, "a non-negative integer"),
    "tfs-method": (METHODS.__contains__, "predict, classify or regress"),
}


def parse_route(header: str | None, default_model: str) -> Route:
    """Read tfs-model-name, tfs-model-version and tfs-method, in the header's order (the
    last of a key wins); the first bad value is a 400, in the fast path's words."""
    values: dict[str, str] = {}
    for pair in (header or "").split(","):
        key, _, value = pair.strip().partition("=")
        key, value = key.strip(), value.strip()
        rule = _RULES.get(key)
        if rule is None:
            continue
        valid, expected = rule
        if not valid(value):
            raise StatusError(
                f"Invalid {key} in X-Amzn-SageMaker-Custom-Attributes: {client_text(value)} "
                f"(expected {expected})",
                400,
            )
        values[key] = value
    name = values.get("tfs-model-name")
    method = values.get("tfs-method")
    return Route(
        name or default_model, values.get("tfs-model-version"), method or "predict", name, method
    )
