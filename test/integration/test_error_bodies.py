"""One error shape through the whole native stack: one bad request per layer that answers
errors (nginx itself, its limits, a model server error on a TF Serving request nginx passes
straight on, the Python service's built-in formats and falcon routes, a user handler raising
HandlerError, returning what the contract does not allow or crashing, the multi-model API, a
model server error the Python service passes on; and, on the service's own socket, a route it
does not have), and every body is JSON with the same keys:
the message and the request id the client sent."""

from __future__ import annotations

import io
import json
import re
import shutil
import socket
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
import pytest
import requests

from conftest import command_line, serve_stack
from sagemaker_serving.config.service_config import ServiceConfig

KEYS = {"error", "request_id"}  # of every error body, whichever layer writes it
CA = "X-Amzn-SageMaker-Custom-Attributes"
LIMIT_MB = 1

CODED = textwrap.dedent(
    """
    from sagemaker_serving import HandlerError


    def input_handler(data, context):
        body = data.read()
        if body == b"refuse":
            raise HandlerError("refused by the model's handler", 422)
        if body == b"wrong":
            return 42  # not a request body
        if body == b"crash":
            raise RuntimeError("the model's handler crashed")
        return body


    def output_handler(response, context):
        return response.content, "application/json"
    """
)


@dataclass
class Case:
    """One bad request: who answers it, what is sent, and the status it gets."""

    layer: str
    method: str
    path: str
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def npy(values: list[float]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, dtype=np.float32))
    return buffer.getvalue()


SINGLE_MODEL = [
    Case("nginx: no such location", "GET", "/nope", 404),
    Case("nginx: method", "POST", "/ping", 405),
    Case(
        "nginx: body limit",
        "POST",
        "/invocations",
        413,
        b"1" * (LIMIT_MB * 1024 * 1024 + 1),
        {"Content-Type": "application/json"},
    ),
    Case(
        "model server, a TF Serving request nginx passes on: malformed JSON",
        "POST",
        "/invocations",
        400,
        b'{"instances": [1.0',
        {"Content-Type": "application/json"},
    ),
    Case(
        "model server, a TF Serving request nginx passes on: no such version",
        "POST",
        "/invocations",
        404,
        b'{"instances": [1.0]}',
        {"Content-Type": "application/json", CA: "tfs-model-version=7"},
    ),
    Case(
        "Python service: built-in formats",
        "POST",
        "/invocations",
        400,
        b"not npy",
        {"Content-Type": "application/x-npy"},
    ),
    Case(
        "model server through the Python service",
        "POST",
        "/invocations",
        404,
        npy([1.0]),
        {"Content-Type": "application/x-npy", CA: "tfs-model-version=7"},
    ),
]

MULTI_MODEL = [
    Case("Python service: /invocations on a multi-model endpoint", "POST", "/invocations", 400),
    Case(
        "multi-model API: a url without a model",
        "POST",
        "/models",
        404,
        b'{"model_name": "gone", "url": "missing"}',
    ),
    Case(
        "multi-model API: the model server cannot load it",
        "POST",
        "/models",
        500,
        b'{"model_name": "broken", "url": "broken"}',
    ),
    Case("multi-model API: malformed load request", "POST", "/models", 400, b"{"),
    Case("multi-model API: not loaded", "GET", "/models/nope", 404),
    Case("multi-model API: method", "PUT", "/models/plain", 405),
    Case("user handler: HandlerError", "POST", "/models/coded/invoke", 422, b"refuse"),
    Case("user handler: returns no request body", "POST", "/models/coded/invoke", 500, b"wrong"),
    Case("user handler: crashes", "POST", "/models/coded/invoke", 500, b"crash"),
    Case(
        "model server through a multi-model invocation",
        "POST",
        "/models/plain/invoke",
        400,
        b'{"instances": ["not a number"]}',
        {"Content-Type": "application/json"},
    ),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """half_plus_three for the single-model endpoint; `plain` (no code), `coded` (CODED) and
    `broken` (a SavedModel that does not load) for the multi-model one."""
    import example_models as em

    root = tmp_path_factory.mktemp("error_body_models")
    em.half_plus_three_tf1(root / "single" / "half_plus_three", versions=(1,))
    shutil.copytree(root / "single" / "half_plus_three", root / "multi" / "plain")
    shutil.copytree(root / "single" / "half_plus_three", root / "multi" / "coded")
    (root / "multi" / "coded" / "code").mkdir()
    (root / "multi" / "coded" / "code" / "inference.py").write_text(CODED)
    (root / "multi" / "broken" / "1").mkdir(parents=True)
    (root / "multi" / "broken" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    return root


@pytest.fixture(scope="module")
def single_model(models, tmp_path_factory):
    env = {"SAGEMAKER_MAX_PAYLOAD_IN_MB": str(LIMIT_MB), "SAGEMAKER_GUNICORN_WORKERS": "1"}
    with serve_stack(models / "single", tmp_path_factory.mktemp("errors_single"), env) as server:
        yield server


@pytest.fixture(scope="module")
def multi_model(models, tmp_path_factory):
    env = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_GUNICORN_WORKERS": "1"}
    with serve_stack(models / "multi", tmp_path_factory.mktemp("errors_multi"), env) as server:
        for name in ("plain", "coded"):
            reply = requests.post(
                f"{server.url}/models", json={"model_name": name, "url": name}, timeout=120
            )
            assert reply.status_code == 200, reply.text
        yield server


def error_keys(url: str, case: Case, request_id: str) -> set[str]:
    """`case` sent with `request_id` as SageMaker's inference id: its status, a JSON body
    naming that id and saying what was wrong; the body's keys."""
    headers = {"X-Amzn-SageMaker-Inference-Id": request_id, **case.headers}
    reply = requests.request(
        case.method, url + case.path, data=case.body, headers=headers, timeout=120
    )
    where = f"{case.layer}: {reply.status_code} {reply.text[:300]!r}"
    assert reply.status_code == case.status, where
    assert reply.headers["Content-Type"].startswith("application/json"), where
    doc = reply.json()
    assert isinstance(doc, dict), where
    assert doc.get("request_id") == request_id == reply.headers["X-Request-Id"], where
    assert isinstance(doc.get("error"), str) and doc["error"].strip(), where
    return set(doc)


def service_socket(server) -> str:
    """The Python service's unix socket (in its config file), which only nginx may call."""
    for proc in psutil.Process(server.proc.pid).children(recursive=True):
        command = command_line(proc).split(" ")
        if command[1:3] == ["-m", "sagemaker_serving.python_service"]:
            return ServiceConfig.from_file(Path(command[3])).socket_path
    raise AssertionError("no Python service among serve's processes")


def direct_error_keys(path: str, request: bytes, status: int, request_id: str) -> set[str]:
    """`request` straight to the service's socket (not through nginx): `status`, a JSON body
    with `request_id` and a message; the body's keys."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):  # every answer here closes the connection or ends
            reply += chunk
            head, _, body = reply.partition(b"\r\n\r\n")
            if b"content-length: %d" % len(body) in head.lower():
                break
    head, _, body = reply.partition(b"\r\n\r\n")
    where = f"{request[:40]!r}: {reply[:300]!r}"
    assert head.startswith(b"HTTP/1.1 %d " % status), where
    assert b"content-type: application/json" in head.lower(), where
    doc = json.loads(body)
    assert doc.get("request_id") == request_id, where
    assert isinstance(doc.get("error"), str) and doc["error"].strip(), where
    return set(doc)


def test_every_layer_answers_an_error_with_the_same_keys(single_model, multi_model):
    found = {}
    for stack, cases in ((single_model, SINGLE_MODEL), (multi_model, MULTI_MODEL)):
        for number, case in enumerate(cases):
            found[case.layer] = error_keys(stack.url, case, f"err-{len(found)}-{number}")
    path = service_socket(single_model)
    found["Python service: a route it does not have, on its own socket"] = direct_error_keys(
        path,
        b"GET /nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: err-direct\r\n\r\n",
        404,
        "err-direct",
    )
    assert len(found) == len(SINGLE_MODEL) + len(MULTI_MODEL) + 1
    shapes = {frozenset(keys) for keys in found.values()}
    assert shapes == {frozenset(KEYS)}, found


# What the Python service's HTTP parser (uvicorn's httptools) would refuse, sent to nginx: nginx
# refuses it itself, as JSON with the request's id, or does not pass on the part the parser
# would refuse; it never reaches the service (whose parser answers a plain-text 400). Each is
# sent to the stack whose routes pass it furthest.
def _post(target: bytes, header: bytes) -> bytes:
    return (
        b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        + header + b"Content-Length: 2\r\n\r\n[]"
    )  # fmt: skip


REFUSED_BY_NGINX = {
    "a long method": (b"ABCDEFGHIJKLMNOPQRSTUVWXYZ /ping HTTP/1.1\r\nHost: x\r\n\r\n", "single"),
    "a space in the path": (b"GET /pi ng HTTP/1.1\r\nHost: x\r\n\r\n", "single"),
    "HTTP/9.9": (b"GET /ping HTTP/9.9\r\nHost: x\r\n\r\n", "single"),
    "obsolete line folding": (b"GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "single"),
    "Transfer-Encoding gzip": (
        b"GET /ping HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        "single",
    ),
    "a control character in Accept": (_post(b"/invocations", b"Accept: a\x01b\r\n"), "single"),
    "DEL in the custom attributes": (
        _post(b"/invocations", CA.encode() + b": a\x7fb\r\n"),
        "single",
    ),
    "a raw non-ASCII byte in a model's path": (
        b"GET /models/caf\xe9 HTTP/1.1\r\nHost: x\r\n\r\n",
        "multi",
    ),
    "a raw non-ASCII byte in /models' query": (
        b"GET /models?next_page_token=\xe9 HTTP/1.1\r\nHost: x\r\n\r\n",
        "multi",
    ),
    "an unknown method on /models": (b"FOO /models HTTP/1.1\r\nHost: x\r\n\r\n", "multi"),
    "an unknown method on a model": (b"FOO_BAR /models/plain HTTP/1.1\r\nHost: x\r\n\r\n", "multi"),
}


def raw_exchange(port: int, request: bytes) -> tuple[int, bytes, bytes]:
    """`request` to nginx on `port`: the answer's status, head and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
            head, _, body = reply.partition(b"\r\n\r\n")
            if b"content-length: %d\r\n" % len(body) in head.lower() + b"\r\n":
                break
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


def json_answer(head: bytes, body: bytes) -> dict:
    """A JSON error body that names the request's id (its X-Request-Id)."""
    assert b"\r\ncontent-type: application/json" in head.lower(), head + body[:300]
    doc = json.loads(body)
    request_id = re.search(rb"(?i)\r\nx-request-id: (\w+)", head)
    assert request_id and doc["request_id"] == request_id.group(1).decode(), head + body[:300]
    return doc


@pytest.mark.parametrize("case", REFUSED_BY_NGINX)
def test_what_the_services_parser_would_refuse_nginx_refuses_as_json(
    single_model, multi_model, case
):
    request, stack = REFUSED_BY_NGINX[case]
    status, head, body = raw_exchange(
        (single_model if stack == "single" else multi_model).port, request
    )
    assert 400 <= status < 500, head + body[:300]
    assert json_answer(head, body)["error"].startswith(("Bad Request", "Method Not Allowed"))


def test_a_query_with_raw_bytes_is_not_passed_to_the_service(single_model, multi_model):
    status, head, body = raw_exchange(
        single_model.port, b"GET /metrics?\xe9 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    assert status == 200 and b"sagemaker_requests_total" in body, head + body[:300]
    status, head, body = raw_exchange(multi_model.port, _post(b"/invocations?\xe9", b""))
    assert status == 400, head + body[:300]  # the service's own answer to /invocations
    assert json_answer(head, body)["error"].startswith("This is a multi-model endpoint")
