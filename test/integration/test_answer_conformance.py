"""Answers no model server here gives (null, irregular columns, exotic escapes and numbers,
non-answers): the ANSWER_CASES of test/support/answer_cases.py. A TF Serving request wanting
JSON goes from nginx (serve's config) straight to a stand-in model server that answers the
case's text, and comes back as the Python service's built-in conversion answers it: the same
bytes on both paths, one rule each (config/body_formats.py)."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace

import pytest
import requests

from answer_cases import ANSWER_CASES, AnswerCase
from nginx_front import front_door
from sagemaker_serving.formats.builtin import BuiltinFormats
from sagemaker_serving.formats.errors import PayloadError

ACCEPTS = {"application/json": "json", "application/jsonlines": "json_lines", "text/csv": "csv"}
ANSWERS = {case.name: case.answer for case in ANSWER_CASES}
NOT_AN_ANSWER = "The model server answered with a body that is not a TF Serving answer"


class StandIn(BaseHTTPRequestHandler):
    """POST /v1/models/<case>:predict answers the case's text."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name = self.path.split("/v1/models/", 1)[-1].split(":", 1)[0]
        body = ANSWERS[name]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class NoService(BaseHTTPRequestHandler):
    """The Python service: never asked here (a request reaching it fails the test)."""

    def do_POST(self) -> None:
        self.send_error(599)


@pytest.fixture(scope="module")
def front_url(tmp_path_factory) -> Iterator[str]:
    """serve's nginx (no user code) in front of the stand-in model server."""
    tmp = tmp_path_factory.mktemp("answer_front")
    with front_door(tmp, {}, False, StandIn, NoService) as port:
        yield f"http://127.0.0.1:{port}"


def expected(case: AnswerCase, accept: str) -> bytes | None:
    return getattr(case, ACCEPTS[accept])


def check(status: int, content_type: str, body: bytes, want: bytes | None, accept: str) -> None:
    if want is None:
        assert (status, content_type) == (502, "application/json"), body
        assert NOT_AN_ANSWER.encode() in body
        return
    assert (status, content_type, body) == (200, accept, want)


CASES = [(case, accept) for case in ANSWER_CASES for accept in ACCEPTS]
IDS = [f"{case.name}-{accept.split('/')[1]}" for case, accept in CASES]


@pytest.mark.parametrize("case", ANSWER_CASES, ids=lambda case: case.name)
def test_nginx_passes_the_answer_on_as_the_service_answers_it(front_url, case):
    reply = requests.post(
        f"{front_url}/invocations",
        data=b'{"instances": [1.0]}',
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={case.name}",
        },
        timeout=10,
    )
    assert (reply.status_code, reply.content) == (200, case.json)
    assert reply.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(("case", "accept"), CASES, ids=IDS)
def test_the_service_converts_the_answer(case, accept):
    response = SimpleNamespace(status_code=200, content=case.answer)
    try:
        body, content_type = BuiltinFormats(None).answer(
            response, SimpleNamespace(accept_header=accept)
        )
        status = 200
    except PayloadError as err:
        status, content_type, body = err.status, "application/json", err.message.encode()
    check(status, content_type, body, expected(case, accept), accept)
