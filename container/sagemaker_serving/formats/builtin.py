"""The built-in formats: what the service does without user code, and what a handler calls to
leave the conversion to it (`default_input_handler`, `default_output_handler`: user_code/
defaults.py, which each worker points at its BuiltinFormats).

Every path answers alike (the cases are in test/support/format_cases.py); a TF Serving
request that nginx passes straight to the model server is answered with its JSON as it is,
as here. Without handlers, binary payloads that fit the
model's input go to the model server as gRPC Predict tensors (formats/tensors.py), and their
outputs are written as TF Serving's REST text (tfs_rest_json) before the same conversion as
REST answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tfs_rest_json
from sagemaker_serving.config.body_formats import BINARY_TYPES, JSON
from sagemaker_serving.formats import tensors as tensor_payloads
from sagemaker_serving.formats.answers import encode_response, model_server_error
from sagemaker_serving.formats.errors import PayloadError
from sagemaker_serving.formats.media import media_type
from sagemaker_serving.formats.request import ModelRequest, decode_request
from sagemaker_serving.formats.signature import signature
from sagemaker_serving.formats.tensors import TensorRequest
from sagemaker_serving.tfs_client.client import ModelServerClient

__all__ = ["BuiltinFormats"]

LARGE_PAYLOAD = 64 * 1024  # bytes: a conversion of more runs on a thread (placement.py)


class BuiltinFormats:
    """Request decoding and answer encoding for one service process."""

    def __init__(
        self,
        client: ModelServerClient | None,
        on_records: Callable[[int | None], None] | None = None,
    ) -> None:
        self.client = client
        # the records of each request decoded (the metrics)
        self.on_records = on_records or (lambda count: None)

    def may_wait(self, context: Any, size: int) -> bool:
        """Whether `request` may take a while: a large payload, or a binary one, which needs
        the model's signature from the model server."""
        return size > LARGE_PAYLOAD or media_type(context.request_content_type) in BINARY_TYPES

    def decode(self, data: Any, context: Any, tensors: bool) -> ModelRequest | TensorRequest:
        """The client's payload as a TF Serving REST request, or (`tensors`) as Predict
        tensors where the payload fits the model's input as it is. Raises PayloadError."""
        body = data.read()
        media = media_type(context.request_content_type)
        method = context.method or "predict"
        inputs = None
        if media in BINARY_TYPES:
            inputs, outputs = signature(self._metadata(context))
            if tensors:
                request = tensor_payloads.tensor_request(body, media, inputs, outputs, method)
                if request is not None:
                    self.on_records(request.records)
                    return request
        decoded = decode_request(body, context.request_content_type, inputs, method)
        self.on_records(decoded.records)
        return decoded

    def streamed(self, head: bytes, context: Any) -> tensor_payloads.StreamedTensor | None:
        """A large x-npy body that starts with `head`, as a tensor sent as it arrives; None
        when it is read whole (tensors.streamed_npy)."""
        inputs, outputs = signature(self._metadata(context))
        streamed = tensor_payloads.streamed_npy(
            head, context.content_length or 0, inputs, outputs, context.method or "predict"
        )
        if streamed is not None:
            self.on_records(streamed.records)
        return streamed

    def request(self, data: Any, context: Any) -> bytes:
        """default_input_handler: the TF Serving REST request body for the payload."""
        request = self.decode(data, context, tensors=False)
        assert isinstance(request, ModelRequest)
        return request.body

    def answer(self, response: Any, context: Any) -> tuple[bytes, str]:
        """A model server's REST answer as Accept asks (default_output_handler too); an error
        of its as it wrote it, on one line, naming the request (its status goes with it:
        pipeline.py)."""
        if response.status_code != 200:
            return model_server_error(response.content, context.request_id), JSON
        return encode_response(response.content, context.accept_header)

    def tensor_answer(self, outputs: dict, context: Any) -> tuple[bytes, str]:
        """Predict outputs as Accept asks, from the text TF Serving's REST API writes."""
        try:
            text = tfs_rest_json.predict_response(outputs, row_format=True)
        except tfs_rest_json.TensorJsonError as err:
            raise PayloadError(str(err), 400) from None
        return encode_response(text, context.accept_header)

    def _metadata(self, context: Any) -> dict:
        if self.client is None:
            raise RuntimeError(
                "The built-in binary formats need the model's signature from the model server"
            )
        model = context.model_name or context.default_model_name
        return self.client.metadata(model, context.model_version, context.deadline)
