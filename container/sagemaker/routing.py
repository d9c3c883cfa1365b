"""`X-Amzn-SageMaker-Custom-Attributes` routing: model name, version and method, validated."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .handler_context import HandlerError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
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


def parse_route(header: str | None, default_model: str) -> Route:
    """Read tfs-model-name, tfs-model-version and tfs-method; a bad value is a 400."""
    values: dict[str, str] = {}
    for pair in (header or "").split(","):
        key, _, value = pair.strip().partition("=")
        values[key.strip()] = value.strip()
    name = values.get("tfs-model-name")
    version = values.get("tfs-model-version")
    method = values.get("tfs-method")
    if name is not None and not NAME.fullmatch(name):
        raise HandlerError(
            f"Invalid tfs-model-name in X-Amzn-SageMaker-Custom-Attributes: {name!r} "
            "(expected letters, digits, '.', '_' or '-')"
        )
    if version is not None and not VERSION.fullmatch(version):
        raise HandlerError(
            f"Invalid tfs-model-version in X-Amzn-SageMaker-Custom-Attributes: {version!r} "
            "(expected a non-negative integer)"
        )
    if method is not None and method not in METHODS:
        raise HandlerError(
            f"Invalid tfs-method in X-Amzn-SageMaker-Custom-Attributes: {method!r} "
            "(expected predict, classify or regress)"
        )
    return Route(name or default_model, version, method or "predict", name, method)
