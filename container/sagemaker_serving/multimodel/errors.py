"""What the /models API answers other than 200, in the AWS container's words where it has
them."""

from __future__ import annotations

from sagemaker_serving.errors import StatusError


class MultiModelError(StatusError):
    """A load/unload/get answer other than 200: status and message for the JSON body."""


def not_loaded(name: str) -> MultiModelError:
    """404 for a model that is not loaded, in the AWS container's words."""
    return MultiModelError(f"Model {name} is not loaded yet.", 404)


def no_base_path(url: str, name: str) -> MultiModelError:
    """404 for a load whose url holds no SavedModel version, in the AWS container's words."""
    return MultiModelError(f"Could not find valid base path {url} for servable {name}", 404)


def already_loaded(name: str) -> MultiModelError:
    """409 for a second load of a name, in the AWS container's words."""
    return MultiModelError(f"Model {name} is already loaded.", 409)


def as_multi_model_error(what: str, exc: StatusError) -> MultiModelError:
    """A model server call's failure (503 down, 504 past the deadline, ...) as ours."""
    if isinstance(exc, MultiModelError):
        return exc
    return MultiModelError(f"{what}: {exc.message}", exc.status if exc.status >= 500 else 500)
