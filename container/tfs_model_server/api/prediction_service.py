"""gRPC tensorflow.serving.PredictionService over the data plane: Predict, Classify, Regress,
MultiInference and GetModelMetadata."""

from __future__ import annotations

import functools
from typing import Any

import grpc
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    model_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from tfs_model_server.api import predict_wire
from tfs_model_server.api.grpc_calls import Calls, deadline, requested_spec
from tfs_model_server.core import servable as sv
from tfs_model_server.core.dataplane import InferenceResult, ModelRef, model_spec
from tfs_model_server.core.example_inputs import serialized_examples
from tfs_model_server.core.tensor_protos import to_ndarray, to_proto


def _fill_result(result: InferenceResult, out: Any) -> None:
    """Write a classify or regress result into its ClassificationResult/RegressionResult."""
    if result.classifications is not None:
        for row in result.classifications:
            classifications = out.classifications.add()
            for label, score in row:
                classifications.classes.add(label=label.decode("utf-8", "replace"), score=score)
    else:
        for value in result.regressions or []:
            out.regressions.add(value=value)


def _response_spec(result: InferenceResult) -> model_pb2.ModelSpec:
    """A classify/regress result's model_spec: its signature named even when the request left
    it to the default (MakeModelSpec)."""
    return model_spec(result.model_name, result.version, result.signature_name)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer, Calls):
    """Predict, Classify, Regress, MultiInference and GetModelMetadata."""

    def Predict(
        self, read: predict_wire.ReadPredict, context: grpc.ServicerContext
    ) -> predict_pb2.PredictResponse:
        """Predict, its request read by predict_wire (add_to_server)."""
        request = read.message

        def run() -> predict_pb2.PredictResponse:
            ref = ModelRef.from_spec(requested_spec(request))
            inputs = {k: to_ndarray(v, k, read.contents.get(k)) for k, v in request.inputs.items()}
            result = self.plane.predict(
                ref,
                inputs,
                list(request.output_filter),
                deadline(context),
            )
            response = predict_pb2.PredictResponse(
                model_spec=model_spec(result.model_name, result.version, result.signature_name)
            )
            for alias, value in result.outputs.items():
                response.outputs[alias].CopyFrom(to_proto(value))
            return response

        return self.call("predict", request.model_spec.name, context, run)

    def Classify(
        self, request: classification_pb2.ClassificationRequest, context: grpc.ServicerContext
    ) -> classification_pb2.ClassificationResponse:
        response = classification_pb2.ClassificationResponse()
        return self._infer("classify", sv.CLASSIFY_METHOD, request, context, response)

    def Regress(
        self, request: regression_pb2.RegressionRequest, context: grpc.ServicerContext
    ) -> regression_pb2.RegressionResponse:
        response = regression_pb2.RegressionResponse()
        return self._infer("regress", sv.REGRESS_METHOD, request, context, response)

    def _infer(
        self, api: str, method: str, request: Any, context: grpc.ServicerContext, response: Any
    ) -> Any:
        """Classify or Regress: fill `response` (with its model_spec and result)."""

        def run() -> Any:
            ref = ModelRef.from_spec(requested_spec(request))
            examples = functools.partial(serialized_examples, request.input)
            result = self.plane.infer(ref, method, examples, deadline(context))
            response.model_spec.CopyFrom(_response_spec(result))
            _fill_result(result, response.result)
            return response

        return self.call(api, request.model_spec.name, context, run)

    def MultiInference(
        self, request: inference_pb2.MultiInferenceRequest, context: grpc.ServicerContext
    ) -> inference_pb2.MultiInferenceResponse:
        def run() -> inference_pb2.MultiInferenceResponse:
            examples = functools.partial(serialized_examples, request.input)
            tasks = [(ModelRef.from_spec(t.model_spec), t.method_name) for t in request.tasks]
            results = self.plane.multi_inference(tasks, examples, deadline(context))
            response = inference_pb2.MultiInferenceResponse()
            for result in results:
                out = response.results.add(model_spec=_response_spec(result))
                classified = result.classifications is not None
                _fill_result(
                    result, out.classification_result if classified else out.regression_result
                )
            return response

        name = request.tasks[0].model_spec.name if request.tasks else ""
        return self.call("multi_inference", name, context, run)

    def GetModelMetadata(
        self, request: get_model_metadata_pb2.GetModelMetadataRequest, context: grpc.ServicerContext
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        fields = list(request.metadata_field)
        return self.call_for_model(
            "get_model_metadata", request, context, lambda ref: self.plane.metadata(ref, fields)
        )


def add_to_server(service: PredictionService, server: grpc.Server) -> None:
    """The service on `server`, Predict's requests read by predict_wire (the first handler
    that knows a method answers it)."""
    predict = grpc.unary_unary_rpc_method_handler(
        service.Predict,
        request_deserializer=predict_wire.read,
        response_serializer=predict_pb2.PredictResponse.SerializeToString,
    )
    name = "tensorflow.serving.PredictionService"
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(name, {"Predict": predict}),)
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(service, server)
