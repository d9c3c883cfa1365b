"""The built-in formats against a real model server: requests as REST bodies or Predict
tensors (by the model's signature), answers as Accept asks, model server errors as
HandlerError, and the default handlers user code may call."""

from __future__ import annotations

import io
import json
import time

import numpy as np
import pytest
import requests

from sagemaker_serving import default_input_handler, default_output_handler
from sagemaker_serving.formats.builtin import BuiltinFormats
from sagemaker_serving.formats.request import ModelRequest
from sagemaker_serving.formats.tensors import TensorRequest
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.tfs_client.client import ModelServerClient
from sagemaker_serving.tfs_client.errors import ModelServerError
from sagemaker_serving.user_code import defaults
from sagemaker_serving.user_code.handler_api import Context


def context(content_type="application/json", accept="application/json", **fields) -> Context:
    values = {name: None for name in Context._fields}
    values.update(
        request_content_type=content_type,
        accept_header=accept,
        deadline=time.monotonic() + 10,
        default_model_name="half_plus_two",
        **fields,
    )
    return Context(**values)


def npy(*values: float) -> io.BytesIO:
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, np.float32))
    buffer.seek(0)
    return buffer


@pytest.fixture(scope="module")
def formats(tfs_server) -> BuiltinFormats:
    client = ModelServerClient([tfs_server.rest_port], [tfs_server.grpc_port])
    return BuiltinFormats(client, ServiceMetrics().records)


def test_json_passes_through_as_a_rest_body(formats):
    request = formats.decode(io.BytesIO(b'{"instances": [1]}'), context(), tensors=True)
    assert isinstance(request, ModelRequest) and request.body == b'{"instances": [1]}'


def test_binary_payloads_become_tensors_by_the_models_signature(formats):
    request = formats.decode(npy(1.0, 2.0), context("application/x-npy"), tensors=True)
    assert isinstance(request, TensorRequest)
    assert request.inputs["x"].tolist() == [1.0, 2.0]
    rest = formats.decode(npy(1.0), context("application/x-npy"), tensors=False)
    assert isinstance(rest, ModelRequest) and json.loads(rest.body) == {"instances": [1.0]}


def test_a_model_the_server_lacks_is_its_404(formats):
    with pytest.raises(ModelServerError) as info:
        formats.decode(npy(1.0), context("application/x-npy", model_name="absent"), True)
    assert info.value.status == 404 and "absent" in info.value.message


def test_answers_follow_accept_and_errors_stay_as_the_model_server_wrote_them_on_one_line(
    formats, tfs_server
):
    uri = f"http://127.0.0.1:{tfs_server.rest_port}/v1/models/half_plus_two:predict"
    good = requests.post(uri, data='{"instances": [1.0, 2.0]}', timeout=10)
    assert formats.answer(good, context(accept="text/csv")) == (b"2.5\n3.0\n", "text/csv")
    bad = requests.post(uri, data='{"instances": ["x"]}', timeout=10)
    assert b"\n" in bad.content
    one_line = bad.content.replace(b"\n    ", b"").replace(b"\n", b"")
    body, content_type = formats.answer(bad, context(accept="text/csv", request_id="r-1"))
    assert content_type == "application/json"  # the model server's text, naming the request
    assert body == one_line.replace(b'"error": "', b'"request_id": "r-1", "error": "', 1)
    assert json.loads(body) == {**json.loads(bad.content), "request_id": "r-1"}


def test_tensor_answers_are_written_as_tf_servings_rest_text(formats):
    outputs = {"y": np.array([2.5, 3.0], np.float32)}
    body, content_type = formats.tensor_answer(outputs, context())
    assert json.loads(body) == {"predictions": [2.5, 3.0]} and content_type == "application/json"


def test_the_default_handlers_outside_the_container(tfs_server):
    """A user's own test of inference.py: the built-in formats without a model server."""
    defaults._installed.clear()
    body = default_input_handler(io.BytesIO(b"1.0\n2.0\n"), context("text/csv"))
    assert json.loads(body) == {"instances": [1.0, 2.0]}
    with pytest.raises(RuntimeError, match="signature"):
        default_input_handler(npy(1.0), context("application/x-npy"))


def test_the_default_handlers_use_the_formats_installed_in_the_process(formats, tfs_server):
    defaults.install(formats)
    try:
        body = default_input_handler(io.BytesIO(b"1.0\n2.0\n"), context("text/csv"))
        assert json.loads(body) == {"instances": [1.0, 2.0]}
        body = default_input_handler(npy(4.0), context("application/x-npy"))  # the signature
        assert json.loads(body) == {"instances": [4.0]}
        uri = f"http://127.0.0.1:{tfs_server.rest_port}/v1/models/half_plus_two:predict"
        reply = requests.post(uri, data=b'{"instances": [1.0, 2.0]}', timeout=10)
        assert default_output_handler(reply, context(accept="application/jsonlines")) == (
            b"2.5\n3.0\n",
            "application/jsonlines",
        )
    finally:
        defaults._installed.clear()
