"""What every gRPC method of the model server shares: its deadline, its metrics, its errors."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from tensorflow_serving.apis import model_pb2

from tfs_model_server.core.dataplane import DataPlane, ModelRef
from tfs_model_server.errors import ServingError, invalid_argument

log = logging.getLogger(__name__)

Response = TypeVar("Response")


def deadline(context: grpc.ServicerContext) -> float | None:
    """The call's deadline as a time.monotonic() value (None when the client set none)."""
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def requested_spec(request: Any) -> model_pb2.ModelSpec:
    """The request's model_spec; INVALID_ARGUMENT when it has none, as TF Serving's services."""
    if not request.HasField("model_spec"):
        raise invalid_argument("Missing ModelSpec")
    return request.model_spec


class Calls:
    """Runs a handler, recording metrics and turning ServingError into a gRPC status."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def call_for_model(
        self,
        api: str,
        request: Any,
        context: grpc.ServicerContext,
        fn: Callable[[ModelRef], Response],
    ) -> Response:
        """call() of fn on the model the request's model_spec names."""
        return self.call(
            api,
            request.model_spec.name,
            context,
            lambda: fn(ModelRef.from_spec(requested_spec(request))),
        )

    def call(
        self,
        api: str,
        model_name: str,
        context: grpc.ServicerContext,
        fn: Callable[[], Response],
    ) -> Response:
        """fn's response; its ServingError (or any failure, as INTERNAL) aborts the RPC."""
        start = time.perf_counter()
        response: Any = None
        try:
            response = fn()
        except ServingError as exc:
            self.plane.metrics.record_request(model_name, api, exc.code.name)
            context.abort(exc.code.grpc_code, exc.message)
        except Exception as exc:  # a failure of ours: INTERNAL, logged with its traceback
            log.exception("%s failed", api)
            self.plane.metrics.record_request(model_name, api, "INTERNAL")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        self.plane.metrics.record_success(model_name, api, "GRPC", start)
        return response
