"""The model servers' gRPC API: a shared channel per instance, Predict and ReloadConfig.

Failures raise ModelServerError with the status TF Serving's REST API answers for the gRPC
code (503 ModelServerUnavailable, 504 ModelServerTimeout) and the model server's text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from sagemaker_serving.tfs_client.errors import (
    DEADLINE_PASSED,
    ConfigRefused,
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)
from sagemaker_serving.tfs_client.wire import (
    PREDICT_METHOD,
    RELOAD_CONFIG_METHOD,
    ReloadConfigRequest,
    ReloadConfigResponse,
)
from tfs_rest_json.status_codes import http_status

MAX_MESSAGE_BYTES = 2**31 - 1
_RELOAD_TOO_LATE = "The deadline passed before the model server was asked"
# gRPC codes of a call that did not reach the model server or was not answered in time
_NOT_REACHED = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})


class GrpcClient:
    """gRPC to the model servers' gRPC ports; channels are made on first use, in this process
    (a channel made before gunicorn forks would not work in the workers)."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self._channels: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._predict_calls: dict[int, Any] = {}

    def channel(self, index: int) -> Any:
        """The shared grpc.Channel to instance `index`."""
        port = self.ports[index]
        with self._lock:
            if port not in self._channels:
                import grpc

                self._channels[port] = grpc.insecure_channel(
                    f"127.0.0.1:{port}",
                    options=[
                        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ],
                )
            return self._channels[port]

    def predict(self, index: int, request: bytes, deadline: float) -> bytes:
        """Predict on instance `index` with a serialized PredictRequest; the serialized
        PredictResponse."""
        import grpc

        call = self._predict_calls.get(index)
        if call is None:
            call = self._predict_calls[index] = self.channel(index).unary_unary(PREDICT_METHOD)
        try:
            return call(request, timeout=_time_left(deadline, DEADLINE_PASSED))
        except grpc.RpcError as exc:
            raise grpc_error(exc) from None

    def reload_config(self, index: int, config: bytes, deadline: float) -> ConfigRefused | None:
        """HandleReloadConfigRequest with a serialized ModelServerConfig on instance `index`;
        None when the model server applied the config, else its status (code and message).
        TF Serving fails the call with that status; a status in an answered call (as older
        servers send it) counts too. A model server that cannot be reached raises."""
        import grpc

        call = self.channel(index).unary_unary(RELOAD_CONFIG_METHOD)
        request = ReloadConfigRequest(config=config).SerializeToString()
        try:
            answer = call(request, timeout=_time_left(deadline, _RELOAD_TOO_LATE))
        except grpc.RpcError as exc:
            code = exc.code()
            if code is None or code.name in _NOT_REACHED:
                raise grpc_error(exc) from None
            return ConfigRefused(code.name, exc.details() or "")
        status = ReloadConfigResponse.FromString(answer).status
        if not status.error_code:
            return None
        return ConfigRefused(code_name(status.error_code), status.error_message)


def _time_left(deadline: float, too_late: str) -> float:
    """Seconds until the deadline; ModelServerTimeout(`too_late`) when it has passed. A call
    given them fails at once when its model server is down (no wait_for_ready)."""
    timeout = deadline - time.monotonic()
    if timeout <= 0:
        raise ModelServerTimeout(too_late)
    return timeout


def grpc_error(exc: Any) -> ModelServerError:
    """A grpc.RpcError as ModelServerError (status_error)."""
    code = exc.code()
    return status_error(code.name if code is not None else "UNKNOWN", exc.details() or "")


def status_error(code: int | str, details: str) -> ModelServerError:
    """A failed call's gRPC status (its code or the code's name) as ModelServerError: TF
    Serving's REST status for the code, and its text."""
    name = code if isinstance(code, str) else code_name(code)
    details = details or name
    if name == "UNAVAILABLE":
        return ModelServerUnavailable(details)
    if name == "DEADLINE_EXCEEDED":
        return ModelServerTimeout()
    return ModelServerError(details, http_status(name))


def code_name(number: int) -> str:
    """A gRPC status code's name ('NOT_FOUND' for 5)."""
    import grpc

    return next((c.name for c in grpc.StatusCode if c.value[0] == number), "UNKNOWN")
