"""gRPC: tensorflow.serving.PredictionService and ModelService over the data plane."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import Any

import grpc
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from tfs_model_server.core.dataplane import DataPlane, InferenceResult, ModelRef, model_spec
from tfs_model_server.core.errors import ServingError, invalid_argument
from tfs_model_server.core.tensor_protos import to_ndarray, to_proto

log = logging.getLogger(__name__)

ReloadFn = Callable[[Any], None]


def _deadline(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def _examples(request_input) -> tuple[list[bytes], bytes | None]:
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in request_input.example_list.examples], None
    if kind == "example_list_with_context":
        lst = request_input.example_list_with_context
        return [e.SerializeToString() for e in lst.examples], lst.context.SerializeToString()
    raise invalid_argument("Input is empty.")


def _fill_classification(
    result: InferenceResult, out: classification_pb2.ClassificationResult
) -> None:
    for row in result.classifications or []:
        classifications = out.classifications.add()
        for label, score in row:
            classifications.classes.add(label=label.decode("utf-8", "replace"), score=score)


def _fill_regression(result: InferenceResult, out: regression_pb2.RegressionResult) -> None:
    for value in result.regressions or []:
        out.regressions.add(value=value)


class _Calls:
    """Runs a handler, recording metrics and turning ServingError into a gRPC status."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    def call(self, api: str, model_name: str, context: grpc.ServicerContext, fn: Callable[[], Any]):
        start = time.perf_counter()
        try:
            response = fn()
        except ServingError as exc:
            self.plane.metrics.record_request(model_name, api, exc.code.name)
            context.abort(exc.code.grpc_code, exc.message)
        except Exception as exc:  # a failure of ours: INTERNAL, logged with its traceback
            log.exception("%s failed", api)
            self.plane.metrics.record_request(model_name, api, "INTERNAL")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        self.plane.metrics.record_request(model_name, api, "OK")
        self.plane.metrics.request_latency.observe(
            (time.perf_counter() - start) * 1e6, model_name, api, "GRPC"
        )
        return response


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer, _Calls):
    """Predict, Classify, Regress, MultiInference and GetModelMetadata."""

    def Predict(self, request: predict_pb2.PredictRequest, context):
        def run() -> predict_pb2.PredictResponse:
            inputs = {k: to_ndarray(v, k) for k, v in request.inputs.items()}
            result = self.plane.predict(
                ModelRef.from_spec(request.model_spec),
                inputs,
                list(request.output_filter),
                _deadline(context),
            )
            response = predict_pb2.PredictResponse(
                model_spec=model_spec(result.model_name, result.version, result.signature_name)
            )
            for alias, value in result.outputs.items():
                response.outputs[alias].CopyFrom(to_proto(value))
            return response

        return self.call("predict", request.model_spec.name, context, run)

    def Classify(self, request: classification_pb2.ClassificationRequest, context):
        def run() -> classification_pb2.ClassificationResponse:
            examples, ctx = _examples(request.input)
            result = self.plane.classify(
                ModelRef.from_spec(request.model_spec), examples, ctx, _deadline(context)
            )
            response = classification_pb2.ClassificationResponse(
                model_spec=model_spec(
                    result.model_name, result.version, request.model_spec.signature_name
                )
            )
            _fill_classification(result, response.result)
            return response

        return self.call("classify", request.model_spec.name, context, run)

    def Regress(self, request: regression_pb2.RegressionRequest, context):
        def run() -> regression_pb2.RegressionResponse:
            examples, ctx = _examples(request.input)
            result = self.plane.regress(
                ModelRef.from_spec(request.model_spec), examples, ctx, _deadline(context)
            )
            response = regression_pb2.RegressionResponse(
                model_spec=model_spec(
                    result.model_name, result.version, request.model_spec.signature_name
                )
            )
            _fill_regression(result, response.result)
            return response

        return self.call("regress", request.model_spec.name, context, run)

    def MultiInference(self, request: inference_pb2.MultiInferenceRequest, context):
        def run() -> inference_pb2.MultiInferenceResponse:
            examples, ctx = _examples(request.input)
            tasks = [(ModelRef.from_spec(t.model_spec), t.method_name) for t in request.tasks]
            results = self.plane.multi_inference(tasks, examples, ctx, _deadline(context))
            response = inference_pb2.MultiInferenceResponse()
            for task, result in zip(request.tasks, results, strict=True):
                out = response.results.add(
                    model_spec=model_spec(
                        result.model_name, result.version, task.model_spec.signature_name
                    )
                )
                if result.classifications is not None:
                    _fill_classification(result, out.classification_result)
                else:
                    _fill_regression(result, out.regression_result)
            return response

        name = request.tasks[0].model_spec.name if request.tasks else ""
        return self.call("multi_inference", name, context, run)

    def GetModelMetadata(self, request: get_model_metadata_pb2.GetModelMetadataRequest, context):
        return self.call(
            "get_model_metadata",
            request.model_spec.name,
            context,
            lambda: self.plane.metadata(
                ModelRef.from_spec(request.model_spec), list(request.metadata_field)
            ),
        )


class ModelService(model_service_pb2_grpc.ModelServiceServicer, _Calls):
    """GetModelStatus and HandleReloadConfigRequest."""

    def __init__(self, plane: DataPlane, reload_config: ReloadFn) -> None:
        super().__init__(plane)
        self.reload_config = reload_config

    def GetModelStatus(self, request: get_model_status_pb2.GetModelStatusRequest, context):
        return self.call(
            "get_model_status",
            request.model_spec.name,
            context,
            lambda: self.plane.status(ModelRef.from_spec(request.model_spec)),
        )

    def HandleReloadConfigRequest(self, request: model_management_pb2.ReloadConfigRequest, context):
        response = model_management_pb2.ReloadConfigResponse()
        try:
            if request.config.WhichOneof("config") != "model_config_list":
                raise invalid_argument(
                    "ServerCore::HandleReloadConfigRequest only supports "
                    "reloading model_config_list configs."
                )
            self.reload_config(request.config)
        except ServingError as exc:
            log.error("Reload config failed: %s", exc.message)
            response.status.error_code = exc.code.number
            response.status.error_message = exc.message
        return response


def start_grpc_server(
    plane: DataPlane,
    reload_config: ReloadFn,
    *,
    port: int,
    socket_path: str,
    max_threads: int,
    channel_arguments: Sequence[tuple[str, Any]],
    host: str = "0.0.0.0",
) -> grpc.Server:
    """Serve both services on 0.0.0.0:port and/or a UNIX socket; max message size INT32_MAX."""
    options = [
        ("grpc.max_send_message_length", 2**31 - 1),
        ("grpc.max_receive_message_length", 2**31 - 1),
        *channel_arguments,
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="grpc"),
        options=options,
        maximum_concurrent_rpcs=None,
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(plane), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(
        ModelService(plane, reload_config), server
    )
    if port and server.add_insecure_port(f"{host}:{port}") == 0:
        raise OSError(f"Failed to bind the gRPC server to port {port}")
    if socket_path and server.add_insecure_port(f"unix:{socket_path}") == 0:
        raise OSError(f"Failed to bind the gRPC server to unix socket {socket_path}")
    server.start()
    return server
