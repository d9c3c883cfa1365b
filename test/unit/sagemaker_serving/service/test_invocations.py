"""POST /invocations on falcon's test client against a real model server: the built-in
formats, the routing header, user handlers (the context, the model server's answer as a
requests.Response), and errors as JSON with the request id."""

from __future__ import annotations

import io

import numpy as np
import pytest

CA = "X-Amzn-SageMaker-Custom-Attributes"


def invoke(client, body, content_type="application/json", **headers):
    return client.simulate_post(
        "/invocations", body=body, headers={"Content-Type": content_type, **headers}
    )


# ----- without user code -------------------------------------------------------------------


@pytest.fixture
def builtin(make_app, tfs_server):
    return make_app(tfs_server)


def test_json_goes_to_the_model_server_as_it_is(builtin):
    reply = invoke(builtin, '{"instances": [1.0, 2.0, 5.0]}')
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [2.5, 3.0, 4.5]}
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.headers["X-Request-Id"]


def test_csv_in_and_json_lines_out(builtin):
    reply = invoke(builtin, "1.0\n2.0\n", "text/csv", Accept="application/jsonlines")
    assert reply.status_code == 200, reply.text
    assert reply.text.splitlines() == ["2.5", "3.0"]


def test_the_routing_header_picks_model_and_version(builtin):
    for version, expected in (("123", 3.5), ("124", 3.5)):
        headers = {CA: f"tfs-model-name=half_plus_three,tfs-model-version={version}"}
        reply = invoke(builtin, '{"instances": [1.0]}', **headers)
        assert reply.json == {"predictions": [expected]}, reply.text
    reply = invoke(builtin, "{}", **{CA: "tfs-model-version=x1"})
    assert reply.status_code == 400 and "tfs-model-version" in reply.json["error"]


def test_a_model_server_error_passes_through_with_its_status(builtin):
    """TF Serving's own error answer, as it wrote it (as nginx passes it on), naming the
    request as every error does."""
    reply = invoke(builtin, '{"instances": ["x"]}', **{"X-Request-Id": "req-1"})
    assert reply.status_code == 400
    assert "not of expected type" in reply.json["error"] and reply.json["request_id"] == "req-1"
    assert reply.headers["X-Request-Id"] == "req-1"
    reply = invoke(builtin, '{"instances": [1.0]}', **{CA: "tfs-model-name=absent"})
    assert reply.status_code == 404 and "absent" in reply.json["error"]


def test_a_binary_payload_goes_over_grpc_with_the_models_signature(builtin):
    buffer = io.BytesIO()
    np.save(buffer, np.array([1.0, 2.0], np.float32))
    reply = invoke(builtin, buffer.getvalue(), "application/x-npy")
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [2.5, 3.0]}
    versioned = {CA: "tfs-model-name=half_plus_three,tfs-model-version=123"}
    reply = invoke(builtin, buffer.getvalue(), "application/x-npy", **versioned)
    assert reply.json == {"predictions": [3.5, 4.0]}, reply.text


def test_a_model_server_that_is_down_is_503(make_app):
    reply = invoke(make_app(), '{"instances": [1.0]}')
    assert reply.status_code == 503
    assert reply.json["error"] == "The model server is unavailable"  # no internal address


def test_a_multi_model_endpoint_has_no_invocations(make_app):
    reply = invoke(make_app(multi_model=True), "{}")
    assert reply.status_code == 400 and "/models/<name>/invoke" in reply.json["error"]


# ----- with user code ----------------------------------------------------------------------

CLASSIC = """
import json

from sagemaker_serving import HandlerError


def input_handler(data, context):
    if context.request_content_type == "text/plain":
        return json.dumps({"instances": [float(v) for v in data.read().split()]})
    if context.request_content_type == "application/x-teapot":
        raise HandlerError("not a teapot payload", 418)
    if context.request_content_type == "application/x-fail":
        raise ValueError("this handler failed on purpose")
    return data.read()


def output_handler(response, context):
    if context.accept_header == "application/x-context":
        fields = {k: v for k, v in context._asdict().items() if k != "channel"}
        fields["has_channel"] = context.channel is not None
        fields["response"] = {
            "type": type(response).__module__ + "." + type(response).__name__,
            "status_code": response.status_code,
            "json": response.json(),
            "text": response.text,
            "content_type": response.headers["Content-Type"],
            "encoding": response.encoding,
        }
        return json.dumps(fields), "application/json"
    return response.content, "application/json"
"""


def test_input_and_output_handlers(make_app, tfs_server):
    client = make_app(tfs_server, CLASSIC)
    reply = invoke(client, "1 2 5", "text/plain")
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [2.5, 3.0, 4.5]}


def test_handlers_get_the_context_and_a_requests_response(make_app, tfs_server):
    client = make_app(tfs_server, CLASSIC)
    headers = {CA: "tfs-model-name=half_plus_three", "Accept": "application/x-context"}
    reply = invoke(client, '{"instances": [1.0]}', **headers)
    assert reply.status_code == 200, reply.text
    context = reply.json
    assert context["model_name"] == "half_plus_three" and context["model_version"] is None
    assert context["method"] is None and context["has_channel"]
    assert context["rest_uri"] == (
        f"http://127.0.0.1:{tfs_server.rest_port}/v1/models/half_plus_three:predict"
    )
    assert context["grpc_port"] == tfs_server.grpc_port
    assert context["default_model_name"] == "half_plus_two"
    assert context["request_id"] == reply.headers["X-Request-Id"]
    assert 0 < context["timeout"] <= 10
    response = context["response"]
    assert response["type"] == "requests.models.Response"
    assert response["status_code"] == 200 and response["json"] == {"predictions": [3.5]}
    assert response["content_type"] == "application/json" and response["encoding"]


@pytest.mark.parametrize(
    ("content_type", "status", "error"),
    [
        ("application/x-teapot", 418, "not a teapot payload"),
        ("application/x-fail", 500, "ValueError: this handler failed on purpose"),
    ],
)
def test_handler_errors_are_json(make_app, tfs_server, content_type, status, error):
    reply = invoke(make_app(tfs_server, CLASSIC), "1", content_type)
    assert reply.status_code == status
    assert reply.json["error"] == error
    assert reply.json["request_id"] == reply.headers["X-Request-Id"]


SINGLE = """
import json

import requests


def handler(data, context):
    reply = requests.post(context.rest_uri, data=data.read(), timeout=context.timeout)
    return json.dumps({"model": context.model_name, "answer": reply.json()}), None
"""


def test_a_single_handler_calls_the_model_server_itself(make_app, tfs_server):
    client = make_app(tfs_server, SINGLE)
    reply = invoke(client, '{"instances": [2.0]}', **{CA: "tfs-model-name=half_plus_two"})
    assert reply.status_code == 200, reply.text
    assert reply.json == {"model": "half_plus_two", "answer": {"predictions": [3.0]}}
    assert reply.headers["Content-Type"] == "application/json"


DEFAULTS = """
from sagemaker_serving import default_input_handler, default_output_handler


def input_handler(data, context):
    return default_input_handler(data, context)


def output_handler(response, context):
    return default_output_handler(response, context)
"""


def test_handlers_may_leave_the_conversion_to_the_built_in_formats(make_app, tfs_server):
    client = make_app(tfs_server, DEFAULTS)
    reply = invoke(client, "1.0\n3.0\n", "text/csv", Accept="text/csv")
    assert reply.status_code == 200, reply.text
    assert reply.text.splitlines() == ["2.5", "3.5"]
    buffer = io.BytesIO()
    np.save(buffer, np.array([1.0], np.float32))
    reply = invoke(client, buffer.getvalue(), "application/x-npy")
    assert reply.json == {"predictions": [2.5]}, reply.text
    reply = invoke(client, '{"instances": ["x"]}')
    assert reply.status_code == 400 and "not of expected type" in reply.json["error"]


NOT_AN_EXCEPTION = """
class Abort(BaseException):
    pass


def input_handler(data, context):
    raise Abort("stop here")


def output_handler(response, context):
    return response.content, None
"""


def test_a_handler_that_raises_a_base_exception_is_a_json_500(make_app, tfs_server):
    # it went past the service to uvicorn, which answered a text/plain 500
    reply = invoke(make_app(tfs_server, NOT_AN_EXCEPTION), '{"instances": [1.0]}')
    assert reply.status_code == 500
    assert reply.json["error"] == "Abort: stop here"
    assert reply.json["request_id"] == reply.headers["X-Request-Id"]


PASS_ON = """
def input_handler(data, context):
    if context.request_content_type == "application/x-generator":
        return (chunk for chunk in (b'{"instances": ', data.read()[len("x"):], b"}"))
    return data  # as requests.post(data=data) sends it in the AWS container


def output_handler(response, context):
    return response.content, "application/json"
"""


def test_an_input_handler_may_return_the_data_or_a_generator(make_app, tfs_server):
    client = make_app(tfs_server, PASS_ON)
    reply = invoke(client, '{"instances": [1.0, 3.0]}')
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [2.5, 3.5]}
    reply = invoke(client, "x[2.0]", "application/x-generator")
    assert reply.status_code == 200, reply.text
    assert reply.json == {"predictions": [3.0]}


ECHO = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, context.accept_header  # the AWS README's pass-through
"""


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        ("text/csv, application/json", "text/csv"),  # the SDK's PandasDeserializer's
        ("application/json;q=0.9, text/csv;q=0.5", "application/json"),
        ("*/*, text/*", "application/json"),
        ("application/json", "application/json"),
        ("*/*", "application/json"),
    ],
)
def test_an_echoed_accept_list_answers_one_type(make_app, tfs_server, accept, content_type):
    # a list was echoed as it was: "Content-Type: text/csv, application/json" is no media type
    reply = invoke(make_app(tfs_server, ECHO), '{"instances": [1.0]}', Accept=accept)
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == content_type


def test_a_content_type_with_a_comma_in_a_parameter_is_kept():
    from sagemaker_serving.service.pipeline import is_type_list

    assert not is_type_list('multipart/mixed; boundary="a,b"')
    assert not is_type_list("text/plain; charset=utf-8")
    assert is_type_list("text/csv,application/json")
