"""The front door under hostile input: what nginx (+ njs) passes on, what it answers itself,
answers of any size, bodies with huge fields, and what one slow client can hold."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from conftest import ServeProcess, serve_stack
from raw_http import chunked_post, padded_tfs_request, raw, split_reply

CA = "X-Amzn-SageMaker-Custom-Attributes"
CLIENT_TIMEOUT = 3  # SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS of these stacks
PER_CLIENT = 6  # SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT of these stacks
MIB = 1024 * 1024

PASS_THROUGH = """
import csv
import io
import json
import os


def input_handler(data, context):
    body = data.read()
    if context.request_content_type == "text/csv":
        rows = csv.reader(io.StringIO(body.decode()))
        return json.dumps({"instances": [row[0] for row in rows]})
    if context.request_content_type == "application/jsonlines":
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        return json.dumps({"instances": lines})
    return body


def output_handler(response, context):
    if response.status_code != 200:
        from sagemaker_serving import HandlerError

        raise HandlerError(response.json()["error"], response.status_code)
    return response.content, "application/json"
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("front_door_models")
    em.half_plus_three_tf1(root / "half_plus_three")
    em.string_input(root / "strings")
    return root


ENV = {
    "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
    "SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS": str(CLIENT_TIMEOUT),
    "SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
}


@pytest.fixture(scope="module")
def stack(model_dir, tmp_path_factory):
    with serve_stack(model_dir, tmp_path_factory.mktemp("front_door"), ENV) as server:
        yield server


@pytest.fixture(scope="module")
def user_code_stack(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("front_door_user_code")
    shutil.copytree(model_dir, root / "model")
    (root / "model" / "code").mkdir()
    (root / "model" / "code" / "inference.py").write_text(PASS_THROUGH)
    with serve_stack(root / "model", root, ENV) as server:
        yield server


@pytest.fixture(scope="module", params=["fast_path", "user_code"])
def any_stack(request):
    return request.getfixturevalue("stack" if request.param == "fast_path" else "user_code_stack")


def post(server: ServeProcess, body, content_type="application/json", **headers):
    headers = {"Content-Type": content_type, **headers}
    return requests.post(f"{server.url}/invocations", data=body, headers=headers, timeout=120)


def assert_json_error(status: int, headers: dict[str, str], body: bytes, expected: int) -> dict:
    assert status == expected, body
    assert headers["content-type"].startswith("application/json"), headers
    doc = json.loads(body)  # valid UTF-8 JSON
    assert isinstance(doc["error"], str) and doc["error"], doc
    return doc


def nginx_workers_rss(server: ServeProcess) -> int:
    master = int((server.run_dir / "nginx.pid").read_text())
    return sum(p.memory_info().rss for p in psutil.Process(master).children())


# ----- hops pass only what they mean to pass ----------------------------------------------------


def test_a_ping_with_a_body_does_not_desync_the_next_request(stack):
    """/ping's internal subrequests drop the body: they must drop its length too, or the
    Python service reads the next request on the pooled connection as that body."""
    for _ in range(10):
        ping = requests.request("GET", f"{stack.url}/ping", data=b"A" * 20, timeout=5)
        assert ping.status_code == 200, ping.text
        reply = post(stack, b"xx", "application/x-image")
        assert reply.status_code == 415, reply.text  # half_plus_three takes no bytes
        assert reply.headers["Content-Type"] == "application/json"


def test_control_characters_in_a_passed_header_are_400_json(stack):
    reply = raw(stack.port, b"POST /invocations HTTP/1.1\r\nHost: x\r\nAccept: a\x01b\r\n"
                            b"Content-Length: 3\r\nConnection: close\r\n\r\n1.0")  # fmt: skip
    assert_json_error(*split_reply(reply), 400)


def test_an_error_page_on_the_models_api_is_never_proxied(model_dir, tmp_path_factory):
    """nginx's own error pages on /models/* were proxied to the service as a GET carrying the
    original Content-Length: a wrong body to this client, a stall and another client's
    listing to the next."""
    env = {**ENV, "SAGEMAKER_MULTI_MODEL": "true"}
    with serve_stack(model_dir, tmp_path_factory.mktemp("front_door_mme"), env) as mme:
        load = {"model_name": "m0", "url": str(model_dir / "half_plus_three")}
        assert requests.post(f"{mme.url}/models", json=load, timeout=60).status_code == 200
        for _ in range(3):
            reply = raw(
                mme.port,
                b"POST /models/m0/invoke HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 104857601\r\nConnection: close\r\n\r\n",
            )
            doc = assert_json_error(*split_reply(reply), 413)
            assert "Payload Too Large" in doc["error"]
        load = {"model_name": "m1", "url": str(model_dir / "half_plus_three")}
        reply = requests.post(f"{mme.url}/models", json=load, timeout=60)
        assert reply.status_code == 200, reply.text
        assert "models" not in reply.json()  # not somebody's listing
        listed = requests.get(f"{mme.url}/models", timeout=10).json()["models"]
        assert sorted(m["modelName"] for m in listed) == ["m0", "m1"]


# ----- conditional headers mean nothing here ------------------------------------------------------

CONDITIONAL = [
    {"If-None-Match": "*"},
    {"If-Match": '"some-etag"'},
    {"If-Unmodified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"},
    {"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"},
    {"Range": "bytes=0-3"},
]


@pytest.mark.parametrize("conditional", CONDITIONAL, ids=lambda h: next(iter(h)))
def test_conditional_headers_are_ignored_on_invocations(any_stack, conditional):
    reply = post(any_stack, '{"instances": [1.0, 2.0]}', **conditional)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [3.5, 4.0]}


@pytest.mark.parametrize("conditional", CONDITIONAL, ids=lambda h: next(iter(h)))
def test_conditional_headers_are_ignored_on_ping_and_execution_parameters(stack, conditional):
    ping = requests.get(f"{stack.url}/ping", headers=conditional, timeout=5)
    assert (ping.status_code, ping.content) == (200, b"")
    params = requests.get(f"{stack.url}/execution-parameters", headers=conditional, timeout=5)
    assert params.status_code == 200 and "BatchStrategy" in params.json()


# ----- every answer nginx makes itself is JSON ----------------------------------------------------

NGINX_ERRORS = [
    (b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    (b"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 400),
    (b"GET /ping HTTP/1.2\r\nHost: x\r\n\r\n", 400),  # nginx takes any 1.x as 1.1
    (b"GET /ping HTTP/1.10\r\nHost: x\r\n\r\n", 400),
    (b"GET /ping HTTP/1.01\r\nHost: x\r\n\r\n", 400),
    (b"POST /invocations HTTP/1.9\r\nHost: x\r\nContent-Length: 3\r\n\r\n1.0", 400),
    (b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 10000 + b"\r\n\r\n", 431),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"G\x01T /ping HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET /ping HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
    (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
     400),
    (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 104857601\r\n\r\n", 413),
    (b"POST /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"DELETE /ping HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"PUT /execution-parameters HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405),
]  # fmt: skip


@pytest.mark.parametrize("request_bytes, status", NGINX_ERRORS, ids=lambda x: str(x)[:30])
def test_nginx_own_answers_are_json(stack, request_bytes, status):
    reply = raw(stack.port, request_bytes.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                if b"Host" in request_bytes else request_bytes)  # fmt: skip
    assert_json_error(*split_reply(reply), status)


@pytest.mark.parametrize("version", [b"HTTP/1.0", b"HTTP/1.1"])
def test_http_1_0_and_1_1_are_answered(stack, version):
    reply = raw(stack.port, b"GET /ping " + version + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert split_reply(reply)[0] == 200, reply


def test_method_not_allowed_says_which_is(any_stack):
    for method in ("OPTIONS", "GET", "PUT", "DELETE", "PATCH"):
        reply = requests.request(method, f"{any_stack.url}/invocations", timeout=5)
        assert reply.status_code == 405, (method, reply.text)
        assert reply.headers["Allow"] == "POST"
        assert reply.json()["error"].startswith("Method Not Allowed")
    reply = requests.options(f"{any_stack.url}/ping", timeout=5)
    assert reply.status_code == 405 and reply.headers["Allow"] == "GET, HEAD"


# ----- njs lookups and echoes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["constructor", "__proto__", "toString", "hasOwnProperty"])
def test_lookup_tables_have_no_prototype(stack, name):
    reply = post(stack, "1.0", name)
    assert reply.status_code == 415, reply.text
    reply = post(stack, "1.0", Accept=name)
    assert reply.status_code == 406, reply.text
    reply = post(stack, "1.0", **{CA: f"tfs-method={name}"})
    assert reply.status_code == 400, reply.text


def test_header_bytes_echoed_in_errors_are_valid_utf8(stack):
    reply = raw(stack.port, b"POST /invocations HTTP/1.1\r\nHost: x\r\nAccept: \xff\xfe/x\r\n"
                            b"Content-Length: 3\r\nConnection: close\r\n\r\n1.0")  # fmt: skip
    doc = assert_json_error(*split_reply(reply), 406)
    assert "\ufffd\ufffd/x" in doc["error"]


@pytest.mark.parametrize("prefix", [b"", b"\xef\xbb\xbf"], ids=["fast_path", "python_service"])
def test_model_server_errors_that_echo_invalid_utf8_stay_valid_json(stack, prefix):
    # TF Serving's error names the bad key, with the request's raw byte in it (the Python
    # service refuses the bytes itself)
    reply = post(stack, prefix + b'{"\x8fnputs": {"x": [1.0]}}')
    assert reply.status_code == 400
    error = json.loads(reply.content)["error"]  # json.loads: valid UTF-8
    assert "nputs" in error or "Malformed JSON" in error


def test_json_deeper_than_njs_parses_is_treated_alike_bare_and_wrapped(stack):
    deep = "[" * 40 + "1.0" + "]" * 40
    bare = post(stack, deep)
    wrapped = post(stack, '{"instances": ' + deep + "}")
    assert bare.status_code == wrapped.status_code == 200, (bare.text, wrapped.text)
    expected = {"predictions": [json.loads("[" * 39 + "3.5" + "]" * 39)]}
    assert bare.json() == wrapped.json() == expected


@pytest.mark.parametrize("depth", [65, 100, 1000, 4999])
@pytest.mark.parametrize("bare", [True, False], ids=["bare", "instances"])
def test_json_nested_deeper_than_a_tensor_has_dimensions_is_400(any_stack, depth, bare):
    """Deeper than 64 levels is the request's fault on every path (it was a 500 from the
    model server: "maximum supported dimension for an ndarray is currently 64")."""
    deep = "[" * depth + "1.0" + "]" * depth
    reply = post(any_stack, deep if bare else '{"instances": ' + deep + "}")
    doc = assert_json_error(reply.status_code, {"content-type": reply.headers["Content-Type"]},
                            reply.content, 400)  # fmt: skip
    assert len(doc["error"]) < 1000, doc


LONG_NUMBERS = [
    (b"1" * 4301, "application/json"),
    (b'{"instances": [' + b"1" * 4301 + b"]}", "application/json"),
    (b"[1e" + b"9" * 5000 + b"]", "application/json"),
    (b"1" * 4301 + b"\n", "application/jsonlines"),
    (b"1" * (256 * 1024) + b"\n", "text/csv"),
    (b"1" * (256 * 1024) + b"\n", "text/csv; header=absent"),  # the Python service's
]
LONG_NUMBER_IDS = ["bare-int", "instances-int", "exponent", "jsonlines", "csv-fast", "csv-service"]


def assert_too_big(reply: requests.Response) -> None:
    doc = assert_json_error(reply.status_code, {"content-type": reply.headers["Content-Type"]},
                            reply.content, 400)  # fmt: skip
    assert "too big" in doc["error"].lower() and len(doc["error"]) < 1000, doc


@pytest.mark.parametrize(("body", "content_type"), LONG_NUMBERS, ids=LONG_NUMBER_IDS)
def test_numbers_longer_than_int_reads_are_400(stack, body, content_type):
    """A number beyond a double is refused as TF Serving refuses it (400), however many
    digits it has: it was a 500 past Python's 4300-digit int() limit."""
    assert_too_big(post(stack, body, content_type))


@pytest.mark.parametrize(("body", "content_type"), LONG_NUMBERS[:3], ids=LONG_NUMBER_IDS[:3])
def test_numbers_longer_than_int_reads_are_400_through_user_code(
    user_code_stack, body, content_type
):
    """The user-code stack's handler passes JSON on as it is: the model server refuses it."""
    assert_too_big(post(user_code_stack, body, content_type))


# ----- answers of any size, fields of any size ----------------------------------------------------


@pytest.mark.parametrize("megabytes", [2, 10, 50])
def test_large_answers_arrive_whole(any_stack, megabytes):
    count = megabytes * 1_000_000 // 5  # each prediction is "3.5, "
    before = nginx_workers_rss(any_stack)
    reply = post(any_stack, '{"instances": [' + ",".join(["1.0"] * count) + "]}")
    assert reply.status_code == 200, reply.text[:300]
    assert len(reply.content) >= megabytes * 1_000_000
    predictions = reply.json()["predictions"]
    assert len(predictions) == count and set(predictions) == {3.5}
    assert_nginx_memory_returns(any_stack, before)


def assert_nginx_memory_returns(server: ServeProcess, before: int) -> None:
    """After a few small requests the workers hold about what they held before."""
    deadline = time.monotonic() + 30
    while True:
        for _ in range(4):
            assert post(server, '{"instances": [1.0]}').status_code == 200
        after = nginx_workers_rss(server)
        if after <= before + 64 * MIB or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert after <= before + 64 * MIB, (before >> 20, after >> 20)


FIELD = 3 * MIB


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b'"' + b"a" * FIELD + b'"\n', "text/csv"),
        (b'"' + b'a,""' * (FIELD // 4) + b'"\n', "text/csv"),  # commas and quotes inside
        (b"a" * FIELD + b"\n", "text/csv"),
        (json.dumps("a" * FIELD).encode() + b"\n", "application/jsonlines"),
    ],
    ids=["csv_quoted", "csv_escapes", "csv_plain", "jsonlines"],
)
def test_one_field_of_several_megabytes(any_stack, body, content_type):
    before = nginx_workers_rss(any_stack)
    started = time.monotonic()
    reply = post(any_stack, body, content_type, **{CA: "tfs-model-name=strings"})
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json() == {"predictions": [FIELD if b'""' not in body else FIELD * 3 // 4]}
    assert time.monotonic() - started < 60  # linear: seconds at most, never minutes
    assert_nginx_memory_returns(any_stack, before)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b'{"instances": ["abcd"]}', "application/json"), (b'"abcd"\n', "application/jsonlines")],
    ids=["json", "jsonlines"],
)
def test_a_pair_after_other_attributes_routes_as_in_the_aws_container(
    any_stack, body, content_type
):
    """The AWS container scans the header for `tfs-...=...`: `trace=tfs-7;tfs-model-name=strings`
    names the model (nginx's pass-through and the service alike)."""
    reply = post(any_stack, body, content_type, **{CA: "trace=tfs-7;tfs-model-name=strings"})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [4]}


@pytest.mark.parametrize("extra", [0, 1], ids=["at_the_limit", "one_byte_over"])
def test_a_chunked_body_is_served_up_to_the_limit_and_413_json_past_it(any_stack, extra):
    """The framing of a chunked body near the limit once pushed it into a temporary file that
    the fast path could not read (500)."""
    body = padded_tfs_request(100 * MIB + extra)  # streamed in 16 KiB chunks
    reply = raw(any_stack.port, chunked_post("/invocations", body, "application/json", 16384), 120)
    if extra:
        doc = assert_json_error(*split_reply(reply), 413)
        assert doc["error"].startswith(
            "Payload Too Large: the request body is over the limit of 104857600 bytes"
        )
    else:
        status, _, body = split_reply(reply)
        assert status == 200, body[:300]
        assert json.loads(body) == {"predictions": [3.5, 4.0]}


def test_a_long_csv_field_does_not_take_a_worker_down(stack):
    """256 KiB in one unquoted field took an nginx worker to 8 GB when njs built the field a
    character at a time."""
    workers = {p.pid for p in psutil.Process(stack_master(stack)).children()}
    reply = post(stack, b"a" * 262144 + b"\n", "text/csv", **{CA: "tfs-model-name=strings"})
    assert reply.json() == {"predictions": [262144]}
    assert {p.pid for p in psutil.Process(stack_master(stack)).children()} == workers


def stack_master(server: ServeProcess) -> int:
    return int((server.run_dir / "nginx.pid").read_text())


# ----- what one slow client can hold -------------------------------------------------------------


def open_slow_request(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A request whose body never comes (after its headers)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n1")
    return sock


def test_one_client_address_holds_a_bounded_number_of_requests(stack):
    held = [open_slow_request(stack.port) for _ in range(PER_CLIENT)]
    stop = threading.Event()

    def trickle() -> None:  # one body byte per second each: slow, never timed out
        while not stop.wait(1.0):
            for sock in held:
                sock.sendall(b"1")

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        deadline = time.monotonic() + 20
        status = 0
        while time.monotonic() < deadline:  # the slow requests register as they arrive
            status, headers, body = split_reply(raw(stack.port, b"POST /invocations HTTP/1.1\r\n"
                b"Host: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n1.0"))  # fmt: skip
            if status == 429:
                break
            time.sleep(0.1)
        assert_json_error(status, headers, body, 429)
        # another client (address) is served meanwhile
        status, _, body = split_reply(raw(stack.port, b"POST /invocations HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 3\r\nConnection: close\r\n\r\n1.0", source="127.0.0.2"))  # fmt: skip
        assert status == 200, body
    finally:
        stop.set()
        feeder.join()
        for sock in held:
            sock.close()


def test_a_stalled_body_is_dropped_after_the_client_timeout(stack):
    sock = open_slow_request(stack.port)
    started = time.monotonic()
    with sock:
        sock.settimeout(CLIENT_TIMEOUT + 10)
        try:
            data = sock.recv(65536)  # nginx closes (or resets) without an answer
        except ConnectionResetError:
            data = b""
    assert data == b""
    assert time.monotonic() - started < CLIENT_TIMEOUT + 10
    assert post(stack, "1.0").status_code == 200
