"""The whole native stack (serve -> nginx + njs -> model servers) over real HTTP on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from conftest import request_count, serve_stack, settled_counts

CA = "X-Amzn-SageMaker-Custom-Attributes"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("opt_ml_model")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1, 2))
    em.half_plus_two_tf1(root / "half_plus_two")
    em.string_input(root / "strings")
    (root / "half_plus_two" / ".hidden").mkdir()
    (root / "half_plus_two" / "999").mkdir()  # numeric, but no SavedModel: skipped
    return root


@pytest.fixture(scope="module")
def stack(model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    env = {
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "1",
    }
    with serve_stack(model_dir, tmp, env, instances=2) as server:
        yield server


def post(stack, body, content_type="application/json", accept=None, attributes=None):
    headers = {"Content-Type": content_type} if content_type else {}
    if accept:
        headers["Accept"] = accept
    if attributes:
        headers[CA] = attributes
    return requests.post(f"{stack.url}/invocations", data=body, headers=headers, timeout=30)


def assert_json_error(reply, status: int, fragment: str = "") -> dict:
    assert reply.status_code == status, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    doc = reply.json()
    assert fragment in doc["error"], doc
    return doc


def test_ping_is_200_with_empty_body(stack):
    reply = requests.get(f"{stack.url}/ping", timeout=2)
    assert reply.status_code == 200 and reply.content == b""
    assert reply.headers["X-Request-Id"]


def test_tf_serving_request_passes_through_on_one_line(stack):
    reply = post(stack, json.dumps({"instances": [1.0, 2.0, 5.0]}))
    assert reply.status_code == 200
    assert reply.text == '{"predictions": [3.5, 4.0, 5.5]}'  # TF Serving's, its breaks removed
    assert reply.headers["Content-Type"] == "application/json"


def test_other_json_is_wrapped_as_instances(stack):
    assert post(stack, "2.0").json() == {"predictions": [4.0]}
    assert post(stack, '{"x": 2.0}').json() == {"predictions": [4.0]}


def test_content_type_parameters_and_case_are_tolerated(stack):
    reply = post(stack, '{"instances": [1.0]}', "Application/JSON; charset=utf-8")
    assert reply.json() == {"predictions": [3.5]}


def test_missing_content_type_means_json(stack):
    reply = post(stack, '{"instances": [1.0]}', content_type=None)
    assert reply.json() == {"predictions": [3.5]}


@pytest.mark.parametrize(
    "content_type", ["application/jsonlines", "application/jsons", "application/x-jsonlines"]
)
def test_json_lines_in_and_out(stack, content_type):
    reply = post(stack, "1.0\n2.0\n\n5.0\n", content_type, accept="application/jsonlines")
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == "application/jsonlines"
    assert reply.text == "3.5\n4.0\n5.5\n"  # one line per record, as TF Serving wrote it


def test_csv_in_and_out(stack):
    reply = post(stack, "1.0\r\n2\r\n5.0", "text/csv", accept="text/csv")
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == "text/csv"
    assert reply.text == "3.5\n4.0\n5.5\n"


def test_csv_typing_and_quoting_reach_the_model(stack):
    # A string-input model: quoted fields stay strings, even with commas and quotes inside.
    reply = post(
        stack, '"hello, world"\n"say ""hi"""\n', "text/csv", attributes="tfs-model-name=strings"
    )
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["predictions"]) == 2


def test_accept_json_with_q_values(stack):
    reply = post(stack, "1.0", accept="text/csv;q=0.5, application/json")
    assert reply.headers["Content-Type"] == "application/json"
    reply = post(stack, "1.0", accept="application/json;q=0.1, text/csv")
    assert reply.text == "3.5\n"


def test_unsupported_accept_is_406(stack):
    assert_json_error(post(stack, "1.0", accept="image/png"), 406, "Not Acceptable")


def test_routing_by_custom_attributes(stack):
    reply = post(stack, "1.0", attributes="tfs-model-name=half_plus_two")
    assert reply.json() == {"predictions": [2.5]}
    reply = post(stack, "1.0", attributes="tfs-model-name=half_plus_three, tfs-model-version=2")
    assert reply.json() == {"predictions": [3.5]}
    body = json.dumps({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})
    reply = post(stack, body, attributes="tfs-model-name=half_plus_two,tfs-method=regress")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"results": [2.5]}


@pytest.mark.parametrize(
    ("attributes", "status", "fragment"),
    [
        ("tfs-model-name=../../v1/models/x", 400, "tfs-model-name"),
        ("tfs-model-name=", 400, "tfs-model-name"),
        ("tfs-model-version=latest", 400, "tfs-model-version"),
        ("tfs-method=delete", 400, "tfs-method"),
        ("tfs-model-name=nope", 404, "nope"),
        ("tfs-model-name=half_plus_three,tfs-model-version=7", 404, ""),
    ],
)
def test_bad_routing_is_4xx_json(stack, attributes, status, fragment):
    assert_json_error(post(stack, "1.0", attributes=attributes), status, fragment)


@pytest.mark.parametrize(
    ("body", "content_type", "status", "fragment"),
    [
        ("{not json", "application/json", 400, "Malformed JSON"),
        ("", "application/json", 400, "Empty request body"),
        ('{"instances": [1.0,', "application/json", 400, "JSON Parse error"),
        ('{"instances": ["a"]}', "application/json", 400, "not of expected type"),
        ("1.0\n{oops\n", "application/jsonlines", 400, "line 2"),
        ('"unterminated\n1', "text/csv", 400, "unterminated"),
        ("1,2\n3\n", "text/csv", 400, "line 2 has 1 fields"),
        ("hello", "text/plain", 415, "Unsupported Media Type"),
        ("hello", "image/png", 415, "Unsupported Media Type"),
    ],
)
def test_bad_requests_are_4xx_json(stack, body, content_type, status, fragment):
    assert_json_error(post(stack, body, content_type), status, fragment)


def test_body_over_the_limit_is_413_json(stack):
    body = b"[" + b"1.0," * 300_000 + b"1.0]"  # 1.2 MB, limit 1 MB
    assert_json_error(post(stack, body), 413, "Payload Too Large")


def test_unknown_paths_and_methods_are_json(stack):
    assert_json_error(requests.get(f"{stack.url}/nope", timeout=5), 404, "Not Found")
    assert_json_error(requests.get(f"{stack.url}/invocations", timeout=5), 405, "Method")
    assert_json_error(requests.post(f"{stack.url}/ping", timeout=5), 405, "Method")
    # the model servers are never reachable from outside
    assert_json_error(requests.get(f"{stack.url}/_tfs/v1/models/half_plus_two", timeout=5), 404)


def test_execution_parameters(stack):
    reply = requests.get(f"{stack.url}/execution-parameters", timeout=5)
    doc = reply.json()
    assert set(doc) == {"MaxConcurrentTransforms", "BatchStrategy", "MaxPayloadInMB"}
    assert doc["BatchStrategy"] in ("MULTI_RECORD", "SINGLE_RECORD")
    assert doc["MaxPayloadInMB"] == 1
    assert doc["MaxConcurrentTransforms"] * doc["MaxPayloadInMB"] <= 100


def _listener_pid(port: int) -> int:
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            return conn.pid
    raise LookupError(port)


def _request_count(rest_port: int) -> int:
    text = requests.get(
        f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics", timeout=5
    ).text
    return sum(int(float(m)) for m in re.findall(r'request_count\{[^}]*status="OK"\} (\S+)', text))


def test_every_instance_receives_traffic(stack):
    before = [_request_count(p) for p in stack.rest_ports]
    for _ in range(20):
        assert post(stack, "1.0").status_code == 200
    after = [_request_count(p) for p in stack.rest_ports]
    assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)


def _ping_status(stack) -> int:
    try:
        return requests.get(f"{stack.url}/ping", timeout=2).status_code
    except requests.RequestException:
        return 0


def _wait_for(predicate, timeout: float, interval: float = 0.1) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return None


def test_ping_tells_the_truth_when_a_model_server_dies(stack):
    # Runs late in the module: it kills model servers, which serve restarts.
    os.kill(_listener_pid(stack.rest_ports[0]), signal.SIGKILL)
    assert _wait_for(lambda: _ping_status(stack) == 503, 2.0) is not None
    # the other instance keeps answering while the first restarts
    assert post(stack, "1.0").status_code == 200
    assert _wait_for(lambda: _ping_status(stack) == 200, 120, 0.5) is not None, stack.log()[-3000:]
    # every instance down: invocations get a JSON 503, not an nginx page, and /ping says so
    for port in stack.rest_ports:
        os.kill(_listener_pid(port), signal.SIGKILL)
    assert_json_error(post(stack, "1.0"), 503, "model server")
    assert _ping_status(stack) == 503  # at once: /ping connects to each model server
    assert _wait_for(lambda: _ping_status(stack) == 200, 120, 0.5) is not None, stack.log()[-3000:]
    assert post(stack, "1.0").json() == {"predictions": [3.5]}


def test_sigterm_drains_in_flight_requests(tmp_path):
    import example_models as em

    models = tmp_path / "models"
    em.slow_model(models / "slow")
    with serve_stack(models, tmp_path) as server:
        result: dict = {}

        def slow_call() -> None:
            body = json.dumps({"instances": [em.SLOW_MODEL_ITERATIONS // 2]})
            try:
                result["reply"] = post(server, body)
            except requests.RequestException as exc:
                result["error"] = exc

        thread = threading.Thread(target=slow_call)
        thread.start()
        time.sleep(1.0)  # the request is in flight
        server.proc.send_signal(signal.SIGTERM)
        thread.join(30)
        code = server.proc.wait(30)
        assert "reply" in result, result
        assert result["reply"].status_code == 200, result["reply"].text
        assert code == 0, server.log()[-3000:]
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{server.url}/ping", timeout=2)


def test_nan_and_infinity_survive_every_output_format(stack):
    body = '{"instances": [NaN, -Infinity, 1.0]}'
    assert post(stack, body).text == '{"predictions": [NaN, -Infinity, 3.5]}'
    assert post(stack, body, accept="application/jsonlines").text == "NaN\n-Infinity\n3.5\n"
    assert (
        post(stack, "nan\n-inf\n1\n", "text/csv", accept="text/csv").text == "NaN\n-Infinity\n3.5\n"
    )


def test_malformed_http_gets_json_not_html(stack):
    import socket

    with socket.create_connection(("127.0.0.1", stack.port), timeout=10) as sock:
        sock.sendall(b"GARBAGE\r\n\r\n")
        reply = sock.recv(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"] == "Bad Request"


def test_binary_formats_go_to_the_built_in_handlers(stack):
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.array([1.0, 2.0, 5.0], np.float32))
    reply = post(stack, buf.getvalue(), "application/x-npy")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [3.5, 4.0, 5.5]}
    # raw bytes become the b64 value of a model's single string input
    reply = post(
        stack, b"\x00\xffraw", "application/octet-stream", attributes="tfs-model-name=strings"
    )
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["predictions"]) == 1
    # a model without a string input cannot take raw bytes: 415 with a JSON body
    assert_json_error(post(stack, b"\x00\xff", "application/x-image"), 415)
    assert_json_error(post(stack, b"not npy", "application/x-npy"), 400)


def test_front_metrics_count_what_nginx_answers_by_route_status_and_model(stack):
    keys = [
        ("/invocations", 200, "half_plus_two"),
        ("/invocations", 400, "half_plus_three"),
        ("/ping", 200, ""),
    ]
    before = settled_counts(stack.url, keys)  # earlier tests' last counts have arrived
    for _ in range(3):
        assert post(stack, "1.0", attributes="tfs-model-name=half_plus_two").status_code == 200
    assert post(stack, "[[[", "application/json").status_code == 400
    assert requests.get(f"{stack.url}/ping", timeout=5).status_code == 200
    expected = [b + n for b, n in zip(before, (3, 1, 1), strict=True)]
    assert _wait_for(lambda: [request_count(stack.url, *k) for k in keys] == expected, 5), (
        [request_count(stack.url, *k) for k in keys],
        expected,
    )
