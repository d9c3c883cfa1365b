"""code/inference.py through the whole stack: handler shapes, context, errors, deadline,
requirements, metrics and request ids (code/lib: test_user_code_imports.py)."""

from __future__ import annotations

import textwrap
import time

import pytest
import requests

from conftest import request_count, serve_stack, settled_counts, tiny_wheel

CA = "X-Amzn-SageMaker-Custom-Attributes"

CLASSIC = """
import json
import time

import tinypkg                  # code/requirements.txt, installed at start
from sagemaker_serving import HandlerError


def input_handler(data, context):
    kind = context.request_content_type
    if kind == "application/x-sleep":
        time.sleep(6)
        print(f"slept through request {context.request_id}", flush=True)
    if kind == "application/x-fail":
        raise ValueError("this handler failed on purpose")
    if kind == "application/x-teapot":
        raise HandlerError("not a teapot payload", 418)
    if kind == "application/x-where":  # paths of the model and of the run directory
        raise ValueError(f"in {__file__}, with {tinypkg.__file__}")
    if kind == "text/plain":
        numbers = [float(v) for v in data.read().decode().split()]
        return json.dumps({"instances": numbers})
    return data.read()


def output_handler(response, context):
    if context.request_content_type == "application/x-pass-through":  # as user-code.md shows
        return response.content, context.accept_header
    if context.request_content_type == "application/x-raise-for-status":
        response.raise_for_status()  # its message names the URL it asked
    if context.accept_header == "application/x-context":
        fields = {k: v for k, v in context._asdict().items() if k != "channel"}
        fields["has_channel"] = context.channel is not None
        fields["status"] = response.status_code
        fields["tinypkg"] = tinypkg.VALUE
        return json.dumps(fields), "application/json"
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    return response.content, context.accept_header
"""

SINGLE = """
import json


def handler(data, context):
    body = json.loads(data.read())
    return json.dumps({"echo": body, "model": context.model_name}), None
"""


@pytest.fixture(scope="module")
def classic(tmp_path_factory):
    import example_models as em

    root = tmp_path_factory.mktemp("classic")
    models = root / "model"
    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    code = models / "code"
    code.mkdir(parents=True)
    (code / "inference.py").write_text(textwrap.dedent(CLASSIC))
    tiny_wheel(code / "wheelhouse")
    (code / "requirements.txt").write_text("tinypkg==1.0\n")
    env = {
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "4",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "4",
        "SAGEMAKER_GUNICORN_WORKERS": "2",
    }
    with serve_stack(models, root, env) as server:
        yield server


def logged(server, *words: str, seconds: float = 10) -> None:
    """Until the log holds every one of `words` (a worker writes it after answering), or the
    deadline; the caller asserts."""
    deadline = time.monotonic() + seconds
    while not all(word in server.log() for word in words) and time.monotonic() < deadline:
        time.sleep(0.05)


def post(server, body, content_type="application/json", accept=None, **headers):
    headers = {"Content-Type": content_type, **headers}
    if accept:
        headers["Accept"] = accept
    return requests.post(f"{server.url}/invocations", data=body, headers=headers, timeout=30)


def test_classic_handlers_pass_json_through(classic):
    reply = post(classic, '{"instances": [1.0, 2.0]}')
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [3.5, 4.0]}
    assert reply.headers["X-Request-Id"]


def test_input_handler_converts_its_own_format(classic):
    reply = post(classic, "1 2 5", "text/plain", accept="application/json")
    assert reply.json() == {"predictions": [3.5, 4.0, 5.5]}


def test_context_has_the_reference_fields_and_ours(classic):
    reply = post(
        classic,
        '{"instances": [1.0]}',
        accept="application/x-context",
        **{CA: "tfs-model-name=half_plus_three", "X-Amzn-SageMaker-Inference-Id": "abc-123"},
    )
    assert reply.status_code == 200, reply.text
    ctx = reply.json()
    assert ctx["model_name"] == "half_plus_three" and ctx["model_version"] is None
    assert ctx["method"] is None
    assert ctx["rest_uri"].endswith("/v1/models/half_plus_three:predict")
    assert isinstance(ctx["grpc_port"], int) and ctx["has_channel"]
    assert ctx["custom_attributes"] == "tfs-model-name=half_plus_three"
    assert ctx["request_content_type"] == "application/json"
    assert ctx["content_length"] == len('{"instances": [1.0]}')
    assert ctx["default_model_name"] == "half_plus_three"
    assert 0 < ctx["timeout"] <= 4 and ctx["deadline"] > 0
    assert ctx["request_id"] == reply.headers["X-Request-Id"] == "abc-123"
    assert ctx["tinypkg"] == 42


def test_handler_exception_is_500_json_and_logged(classic):
    reply = post(classic, "1", "application/x-fail")
    assert reply.status_code == 500
    doc = reply.json()
    assert doc["error"] == "ValueError: this handler failed on purpose"
    assert doc["request_id"] == reply.headers["X-Request-Id"]
    logged(classic, "Traceback", "this handler failed on purpose")
    assert "this handler failed on purpose" in classic.log()
    assert "Traceback" in classic.log()


def test_handler_error_carries_its_status(classic):
    reply = post(classic, "1", "application/x-teapot")
    assert reply.status_code == 418 and reply.json()["error"] == "not a teapot payload"


def test_model_server_error_reaches_the_output_handler(classic):
    reply = post(classic, '{"instances": ["x"]}')
    assert reply.status_code == 500
    assert "not of expected type" in reply.json()["error"]


def test_a_pass_through_output_handler_keeps_the_model_servers_error_status(classic):
    """`return response.content, context.accept_header` with `Accept: */*` (curl's): a wrong
    type is TF Serving's 400, an unknown model its 404, as on the fast path; a good request
    200; the content type is what the body is, never `*/*`."""
    pass_through = {"content_type": "application/x-pass-through", "accept": "*/*"}
    cases = [
        ('{"instances": [1.0, 2.0]}', {}, 200, "predictions"),
        ('{"instances": ["x"]}', {}, 400, "error"),
        ('{"instances": [1.0]}', {CA: "tfs-model-name=nope"}, 404, "error"),
    ]
    for body, headers, status, key in cases:
        reply = post(classic, body, **pass_through, **headers)
        assert (reply.status_code, reply.headers["Content-Type"]) == (status, "application/json")
        assert key in reply.json(), reply.text


def test_no_answer_names_an_internal_address_or_path(classic):
    """A handler's `raise_for_status()` names the model server's URL, an exception the model
    directory's and the run directory's files: the answer says "the model server" and the
    model-relative path; the log keeps them whole."""
    failed = post(classic, '{"instances": ["x"]}', "application/x-raise-for-status")
    assert failed.status_code == 500
    message = failed.json()["error"]
    assert message.startswith("HTTPError: 400 Client Error: Bad Request for url: ")
    assert message.endswith("the model server") and "127.0.0.1" not in message
    where = post(classic, "1", "application/x-where").json()["error"]
    root = str(classic.run_dir.parent)
    assert root not in where, where
    assert where.startswith("ValueError: in code/inference.py, with <run dir>/"), where
    logged(classic, f"{root}/model/code/inference.py")
    assert f"{root}/model/code/inference.py" in classic.log()


def test_options_on_invocations_is_405_json_allowing_post(classic):
    reply = requests.options(f"{classic.url}/invocations", timeout=10)
    assert reply.status_code == 405, reply.text
    assert reply.json()["error"] and reply.headers["Allow"] == "POST"


def test_bad_routing_is_400(classic):
    reply = post(classic, "{}", **{CA: "tfs-method=delete"})
    assert reply.status_code == 400 and "tfs-method" in reply.json()["error"]


def test_a_handler_past_the_deadline_gets_504_and_the_worker_lives(classic):
    started = time.monotonic()
    reply = post(classic, "1", "application/x-sleep")
    assert reply.status_code == 504, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    assert time.monotonic() - started < 5
    # the same workers keep answering at once (none was killed and restarted)
    assert post(classic, '{"instances": [1.0]}').status_code == 200
    assert "WORKER TIMEOUT" not in classic.log()


def test_a_504_is_counted_once_when_it_is_answered(classic):
    """nginx answers 504 at its timeout (4 s) while the handler sleeps on (6 s): counted
    then, before the handler ends, and not again when it does."""
    key = ("/invocations", 504, "half_plus_three")
    [before] = settled_counts(classic.url, [key])  # earlier tests' counts have arrived
    started = time.monotonic()
    reply = post(classic, "1", "application/x-sleep")
    assert reply.status_code == 504, reply.text
    while request_count(classic.url, *key) != before + 1:
        assert time.monotonic() < started + 5.5, "not counted before the handler ended"
        time.sleep(0.05)
    logged(classic, f"slept through request {reply.headers['X-Request-Id']}")
    assert settled_counts(classic.url, [key]) == [before + 1]


def test_ping_and_metrics(classic):
    assert requests.get(f"{classic.url}/ping", timeout=2).status_code == 200
    post(classic, '{"instances": [1.0]}')
    line = 'sagemaker_requests_total{model="half_plus_three",route="/invocations",status="200"}'
    deadline = time.monotonic() + 10  # a worker moves its figures in within FLUSH_SECONDS
    while line not in (text := requests.get(f"{classic.url}/metrics", timeout=5).text):
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    assert 'sagemaker_stage_duration_seconds_count{stage="model_server"}' in text
    assert 'sagemaker_stage_duration_seconds_count{stage="input_handler"}' in text


def test_single_handler_shape_and_a_failed_requirements_install(tmp_path):
    import example_models as em

    models = tmp_path / "model"
    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text(textwrap.dedent(SINGLE))
    (tmp_path / "a").mkdir()
    with serve_stack(models, tmp_path / "a") as server:
        reply = post(server, '{"a": 1}', **{CA: "tfs-model-name=half_plus_three"})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"echo": {"a": 1}, "model": "half_plus_three"}
        assert reply.headers["Content-Type"] == "application/json"

    (models / "code" / "requirements.txt").write_text("this-package-does-not-exist-anywhere==9.9\n")
    (tmp_path / "b").mkdir()
    with pytest.raises(RuntimeError, match="pip install"), serve_stack(models, tmp_path / "b"):
        pass
