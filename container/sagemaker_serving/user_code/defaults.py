"""`default_input_handler` and `default_output_handler`: the built-in formats, for a handler
that leaves a conversion to them (`from sagemaker_serving import default_input_handler`).

Each process that runs handlers installs what does the work, once, at start: the service's
workers the built-in formats themselves (formats/builtin.py), a handler process the
calls that ask the service for them (environments/host.py), which it does not import.

Standard library only: handler processes import it under the user's interpreter.
"""

from __future__ import annotations

from typing import Any, Protocol


class BuiltinConversions(Protocol):
    def request(self, data: Any, context: Any) -> bytes: ...

    def answer(self, response: Any, context: Any) -> tuple[bytes, str]: ...


_installed: list[BuiltinConversions] = []


def install(conversions: BuiltinConversions) -> None:
    """What the default handlers call in this process (set once, at its start)."""
    _installed[:] = [conversions]


def _conversions() -> BuiltinConversions:
    """The installed conversions; outside the container's processes (a user's own test of
    inference.py), the built-in formats without a model server (every format but the binary
    ones, which need the model's signature)."""
    if not _installed:
        from sagemaker_serving.formats.builtin import BuiltinFormats

        install(BuiltinFormats(None))
    return _installed[0]


def default_input_handler(data: Any, context: Any) -> bytes:
    """The TF Serving REST request body the container would send for this payload without user
    code (JSON, JSON Lines, CSV, images, .npy, tf.Example); a bad payload raises HandlerError
    with its 4xx status."""
    return _conversions().request(data, context)


def default_output_handler(response: Any, context: Any) -> tuple[bytes, str]:
    """(body, content type) as the request's Accept asks (JSON, JSON Lines or CSV); a model
    server error as the model server wrote it (JSON; the answer keeps its status)."""
    return _conversions().answer(response, context)
