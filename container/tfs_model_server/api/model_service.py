"""gRPC tensorflow.serving.ModelService: GetModelStatus and HandleReloadConfigRequest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
)

from tfs_model_server.api.grpc_calls import Calls
from tfs_model_server.core.dataplane import DataPlane
from tfs_model_server.errors import ServingError, invalid_argument

log = logging.getLogger(__name__)

ReloadFn = Callable[[Any], None]


class ModelService(model_service_pb2_grpc.ModelServiceServicer, Calls):
    """GetModelStatus and HandleReloadConfigRequest."""

    def __init__(self, plane: DataPlane, reload_config: ReloadFn) -> None:
        super().__init__(plane)
        self.reload_config = reload_config

    def GetModelStatus(
        self, request: get_model_status_pb2.GetModelStatusRequest, context: grpc.ServicerContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        return self.call_for_model("get_model_status", request, context, self.plane.status)

    def HandleReloadConfigRequest(
        self, request: model_management_pb2.ReloadConfigRequest, context: grpc.ServicerContext
    ) -> model_management_pb2.ReloadConfigResponse:
        """As model_service_impl.cc: a reload that fails is a failed call (its status is set in
        the response too, which gRPC does not send then), and each metric the request names
        gets how much it grew meanwhile."""
        before = self.plane.metrics.int64_values(request.metric_names)
        response = model_management_pb2.ReloadConfigResponse()
        try:
            if request.config.WhichOneof("config") != "model_config_list":
                raise invalid_argument(
                    "ServerModelConfig type not supported by HandleReloadConfigRequest. "
                    "Only ModelConfigList is currently supported"
                )
            self.reload_config(request.config)
        except ServingError as exc:
            log.error("ReloadConfig failed: %s", exc.message)
            response.status.error_code = exc.code.number
            response.status.error_message = exc.message
            context.set_code(exc.code.grpc_code)
            context.set_details(exc.message)
        for name, value in self.plane.metrics.int64_values(request.metric_names).items():
            response.metric.add(name=name, int64_value_increase=value - before[name])
        return response
