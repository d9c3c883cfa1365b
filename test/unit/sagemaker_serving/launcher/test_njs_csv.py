"""The one conversion nginx makes (nginx/tfs.js's csvInstances, the AWS container's own job):
CSV rows of numbers wrapped as {"instances": rows} for the model server, everything else left
to the Python service. Held against the rule's home, formats/csv_rows.py: every body nginx
wraps is the request the service would have sent (the same values), and every body it is not
sure of reaches the service. The real nginx with serve's config, in front of stand-ins that
record what they were sent."""

from __future__ import annotations

import http.client
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import nginx_front
from sagemaker_serving.formats.csv_rows import decode_csv
from sagemaker_serving.formats.errors import PayloadError

SENT: dict[str, list[bytes]] = {"model_server": [], "service": []}


class Recorder(BaseHTTPRequestHandler):
    """Records the body it was sent; answers {"predictions": []}."""

    protocol_version = "HTTP/1.1"
    kind = "model_server"

    def do_POST(self) -> None:
        SENT[self.kind].append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        body = b'{"predictions": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


class ServiceRecorder(Recorder):
    kind = "service"


WRAPPED = [  # plain rows of numbers: nginx wraps them
    "1.0\n2.0\n5.0\n",
    "1,2\n3,4\n",
    "1.0,2.0\r\n3.0,4.0\r\n",
    " 1.5 , -2\n\t3 ,4\t\n",
    "-0\n-0.0\n",
    "12345678901234567890\n",
    "1\n\n2\n\r\n3",
    "0.000001,100\n",
    "7",
]
HANDED_OVER = [  # anything else: the service's
    '"1",2\n',
    "nan\n",
    "-inf\n",
    "1e5\n",
    "1E-3\n",
    "+1\n",
    ".5\n",
    "1.\n",
    "-.5\n",
    "1,2\n3\n",
    "1\n2,3\n",
    "abc\n",
    "",
    "\n",
    "\r\n",
    "01\n",
    "-01,1\n",
    "1_000\n",
    "1-2\n",
    "--1\n",
    "- 1\n",
    "1,-\n",
    "-\n",
    "1.2.3\n",
    "0x10\n",
    "1\u2003\n",
    "1\r2\r",
    "1\r,2\n",
    "\ufeff1\n",
    "1,,2\n",
    "1,2,\n",
    "true\n",
    "null\n",
    "[1]\n",
    "{}\n",
    "1 2\n",
    "1\u00a0\n",
    "\u0661\n",
]


def post(port: int, body: bytes, content_type: str = "text/csv", **headers: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("POST", "/invocations", body, {"Content-Type": content_type, **headers})
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> int:
    tmp = Path(tmp_path_factory.mktemp("njs-csv"))
    with nginx_front.front_door(tmp, {}, False, Recorder, ServiceRecorder) as port:
        yield port


def went_to(port: int, body: bytes, content_type: str = "text/csv", **headers: str) -> str:
    """Which backend got the request, and (model server) what it was sent, checked."""
    for sent in SENT.values():
        sent.clear()
    assert post(port, body, content_type, **headers) == 200
    (where,) = [kind for kind, sent in SENT.items() if sent]
    return where


@pytest.mark.parametrize("text", WRAPPED)
def test_plain_rows_are_wrapped_as_the_service_would(port, text):
    body = text.encode()
    assert went_to(port, body) == "model_server"
    (wrapped,) = SENT["model_server"]
    python = decode_csv(body, "utf-8", False, "predict")  # the rule's home
    assert json.loads(wrapped) == json.loads(python.body)
    assert json.loads(wrapped)["instances"] == json.loads(python.body)["instances"]


@pytest.mark.parametrize("text", HANDED_OVER)
def test_anything_else_goes_to_the_service(port, text):
    body = text.encode()
    assert went_to(port, body) == "service"
    assert SENT["service"] == [body]
    try:  # what the service makes of it (not always what JSON would: why nginx leaves it)
        decode_csv(body, "utf-8", False, "predict")
    except PayloadError:
        pass


@pytest.mark.parametrize(
    ("content_type", "headers", "where"),
    [
        ("text/csv; charset=utf-8", {}, "model_server"),
        ("Text/CSV; Charset=UTF8", {}, "model_server"),
        ("text/csv; header=present", {}, "service"),
        ("text/csv; charset=latin-1", {}, "service"),
        ("text/csv", {"Accept": "text/csv"}, "service"),
        ("text/csv", {"Accept": "application/json"}, "model_server"),
        ("text/csv", {"X-Amzn-SageMaker-Custom-Attributes": "tfs-method=classify"}, "service"),
        ("text/csv", {"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=2"}, "model_server"),
        ("text/csv", {"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=a/b"}, "service"),
    ],
)
def test_only_plain_csv_wanting_json_for_predict_is_wrapped(port, content_type, headers, where):
    assert went_to(port, b"1.0\n2.0\n", content_type, **headers) == where
