"""SAGEMAKER_LOG_FORMAT=json: every line the container writes is a JSON object, and the lines of
one request (nginx's access line, the user's own log lines) carry its request id."""

from __future__ import annotations

import json
import time

import pytest
import requests

from conftest import serve_stack

INFERENCE = """
import logging

log = logging.getLogger("inference")


def input_handler(data, context):
    body = data.read()
    if body == b"boom":
        raise RuntimeError("boom in input_handler")
    log.info("input_handler got %d bytes", len(body))
    return body


def output_handler(response, context):
    return response.content, "application/json"
"""


@pytest.fixture(scope="module")
def json_stack(tmp_path_factory):
    import example_models as em

    root = tmp_path_factory.mktemp("logs_model")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(INFERENCE)
    env = {"SAGEMAKER_LOG_FORMAT": "json", "SAGEMAKER_GUNICORN_WORKERS": "1"}
    with serve_stack(root, tmp_path_factory.mktemp("logs_stack"), env) as server:
        yield server


def _records(server) -> list[dict]:
    lines = [line for line in server.log_path.read_text().splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON log line: {line!r}")
    return records


def test_every_line_is_json_and_a_request_id_follows_the_request(json_stack):
    request_id = "req-abc-123"
    reply = requests.post(
        f"{json_stack.url}/invocations",
        data=b'{"instances": [1.0]}',
        headers={"X-Amzn-SageMaker-Inference-Id": request_id},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["X-Request-Id"] == request_id
    deadline = time.monotonic() + 5  # nginx flushes its access log buffer every second
    while time.monotonic() < deadline:
        records = _records(json_stack)
        tagged = [r for r in records if r.get("request_id") == request_id]
        loggers = {r.get("logger") for r in tagged}
        if {"nginx.access", "inference"} <= loggers:
            break
        time.sleep(0.3)
    assert all({"time", "level", "message"} <= r.keys() or "request" in r for r in records)
    handler_lines = [r for r in tagged if r.get("logger") == "inference"]
    assert [r["message"] for r in handler_lines] == ["input_handler got 20 bytes"]
    (access,) = [r for r in tagged if r.get("logger") == "nginx.access"]
    assert access["status"] == 200 and access["request"].startswith("POST /invocations")
    loggers = {r.get("logger") for r in records}
    assert {"serve", "gunicorn.error"} <= loggers, loggers
    assert any(str(name).startswith("model-server") for name in loggers), loggers


def test_a_handler_failure_logs_its_traceback_in_one_json_line(json_stack):
    reply = requests.post(
        f"{json_stack.url}/invocations",
        data=b"boom",
        headers={"X-Amzn-SageMaker-Inference-Id": "req-bad-1"},
        timeout=30,
    )
    assert reply.status_code == 500, reply.text
    assert reply.json()["error"] == "RuntimeError: boom in input_handler"

    def failures() -> list[dict]:
        return [
            r
            for r in _records(json_stack)
            if r.get("request_id") == "req-bad-1" and r.get("level") == "ERROR"
        ]

    deadline = time.monotonic() + 10  # the service's lines reach the log through serve's relay
    while not failures() and time.monotonic() < deadline:
        time.sleep(0.2)
    (failure,) = failures()
    assert failure["message"] == "handler failed"
    assert "Traceback" in failure["exc"] and "boom in input_handler" in failure["exc"]
