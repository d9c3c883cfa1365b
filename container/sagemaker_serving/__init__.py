"""SageMaker hosting layer: settings, serve supervisor, nginx front door, Python service.

Handlers in code/inference.py may `from sagemaker_serving import HandlerError` to answer with a
4xx status and message of their choosing, and `default_input_handler` /
`default_output_handler` to leave a conversion to the built-in formats.
"""

from collections.abc import Callable
from typing import Any

from sagemaker_serving.user_code.handler_api import Context, HandlerError

__all__ = ["Context", "HandlerError", "default_input_handler", "default_output_handler"]

_DEFAULT_HANDLERS = ("default_input_handler", "default_output_handler")
_overrides: dict[str, Callable[..., Any]] = {}


def use_default_handlers(input_handler: Callable, output_handler: Callable) -> None:
    """In a handler process (environments/host.py): the default handlers ask the service,
    whose built-in formats this process does not import."""
    _overrides.update(default_input_handler=input_handler, default_output_handler=output_handler)


def __getattr__(name: str) -> Any:
    """The default handlers, imported on first use (serve and its tools need none of it)."""
    if name in _DEFAULT_HANDLERS:
        if name in _overrides:
            return _overrides[name]
        from sagemaker_serving.service import default_handlers as builtin_formats

        return getattr(builtin_formats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
