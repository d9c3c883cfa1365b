"""`X-Amzn-SageMaker-Custom-Attributes` routing: model name, version and method, validated by
the rules of config/routing_rules.py (the njs fast path's too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sagemaker_serving.config.routing_rules import (
    DEFAULT_METHOD,
    EXPECTED,
    HEADER,
    METHOD,
    METHODS,
    MODEL_NAME,
    MODEL_NAME_PATTERN,
    MODEL_VERSION,
    MODEL_VERSION_PATTERN,
    PAIR_PATTERN,
)
from sagemaker_serving.errors import StatusError
from sagemaker_serving.formats.media import client_text


@dataclass(frozen=True)
class Route:
    """Where a request goes; the *_given fields are what the header said (None if absent)."""

    model: str
    version: str | None = None
    method: str = DEFAULT_METHOD
    model_given: str | None = None
    method_given: str | None = None

    def path(self) -> str:
        """The model server REST path, e.g. /v1/models/m/versions/2:predict."""
        version = f"/versions/{self.version}" if self.version else ""
        return f"/v1/models/{self.model}{version}:{self.method}"


_VALID: dict[str, Callable[[str], object]] = {
    MODEL_NAME: MODEL_NAME_PATTERN.fullmatch,
    MODEL_VERSION: MODEL_VERSION_PATTERN.fullmatch,
    METHOD: METHODS.__contains__,
}


def parse_route(header: str | None, default_model: str) -> Route:
    """Read tfs-model-name, tfs-model-version and tfs-method where PAIR_PATTERN finds them,
    in the header's order (the last of a key wins); the first bad value is a 400, in the fast
    path's words."""
    values: dict[str, str] = {}
    for pair in PAIR_PATTERN.finditer(header or ""):
        key, value = pair[1], pair[2].strip()
        valid = _VALID.get(key)
        if valid is None:
            continue
        if not valid(value):
            raise StatusError(
                f"Invalid {key} in {HEADER}: {client_text(value)} (expected {EXPECTED[key]})",
                400,
            )
        values[key] = value
    name = values.get(MODEL_NAME)
    method = values.get(METHOD)
    return Route(
        name or default_model, values.get(MODEL_VERSION), method or DEFAULT_METHOD, name, method
    )
