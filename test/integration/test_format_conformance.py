"""Every case of test/support/format_cases.py on every path: one answer whichever path serves it.

Paths: `fast` (a single-model stack without code/: the njs fast path, which hands binary and
some text bodies to the Python service's built-in formats), `user` (the same models with a
code/inference.py whose handlers leave the conversion to `default_input_handler` /
`default_output_handler`: always REST), `multi_model` (POST /models/<name>/invoke on a
multi-model stack: the Python service). Binary payloads marked `grpc` must reach the model
server as gRPC Predict tensors on the built-in paths (fast, multi_model) and by REST on the
user path, and answer the same bytes.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from urllib3 import HTTPHeaderDict

from conftest import ServeProcess, serve_stack
from format_case_builders import PATHS, Case
from format_cases import CASES

CA = "X-Amzn-SageMaker-Custom-Attributes"
MODELS = ("half_plus_three", "strings", "examples", "formats")
BINARY = re.compile(r"application/(x-image|octet-stream|x-npy|x-tfexample|tfrecord|x-tfrecord)")
PASS_THROUGH = """
from sagemaker_serving import default_input_handler, default_output_handler


def input_handler(data, context):
    return default_input_handler(data, context)


def output_handler(response, context):
    return default_output_handler(response, context)
"""
ENV = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}

# error messages a model server words, by case and path: every path must give the same
MODEL_ERRORS: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    folders = {
        "half_plus_three": "half_plus_three",
        "strings": "string_input",
        "examples": "example_input",
        "formats": "formats",
    }
    return em.build_models(tmp_path_factory.mktemp("conformance_models"), folders)


def _user_code_dir(model_dir: Path, tmp: Path) -> Path:
    root = tmp / "model"
    shutil.copytree(model_dir, root)
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(PASS_THROUGH)
    return root


class Stacks:
    """One running stack at a time, for the path the tests ask for (they come grouped by
    path, so each starts once)."""

    def __init__(self, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.model_dir = model_dir
        self.tmp_path_factory = tmp_path_factory
        self.path: str | None = None
        self.exits = contextlib.ExitStack()
        self.server: ServeProcess | None = None

    def get(self, path: str) -> ServeProcess:
        if path != self.path:
            self.close()
            self.server = self.exits.enter_context(self._start(path))
            self.path = path
        assert self.server is not None
        return self.server

    def close(self) -> None:
        self.exits.close()
        self.path = self.server = None

    @contextlib.contextmanager
    def _start(self, path: str) -> Iterator[ServeProcess]:
        tmp = self.tmp_path_factory.mktemp(f"conformance_{path}")
        models, env = self.model_dir, ENV
        if path == "user":
            models = _user_code_dir(self.model_dir, tmp)
        elif path == "multi_model":
            env = {"SAGEMAKER_MULTI_MODEL": "true"}
        with serve_stack(models, tmp, env) as server:
            if path == "multi_model":
                for model in MODELS:
                    body = {"model_name": model, "url": str(self.model_dir / model)}
                    reply = requests.post(f"{server.url}/models", json=body, timeout=120)
                    assert reply.status_code == 200, reply.text
            yield server


@pytest.fixture(scope="module")
def stacks(model_dir, tmp_path_factory) -> Iterator[Stacks]:
    running = Stacks(model_dir, tmp_path_factory)
    try:
        yield running
    finally:
        running.close()


def send(path: str, server: ServeProcess, case: Case) -> requests.Response:
    headers = {"Content-Type": case.content_type, "Accept": case.accept}  # None: not sent
    attributes = [case.attributes] if case.attributes else []
    if path == "multi_model":
        url = f"{server.url}/models/{case.model}/invoke"
    else:
        url = f"{server.url}/invocations"
        attributes.insert(0, f"tfs-model-name={case.model}")
    if attributes:
        headers[CA] = ", ".join(attributes)
    if case.repeated_attributes is None:
        return requests.post(url, data=case.body, headers=headers, timeout=60)
    with requests.Session() as session:  # the header twice: two lines, not joined
        request = session.prepare_request(requests.Request("POST", url, headers, data=case.body))
        lines = HTTPHeaderDict(request.headers)
        lines.add(CA, case.repeated_attributes)
        request.headers = lines  # type: ignore[assignment]
        return session.send(request, timeout=60)


def grpc_predicts(server: ServeProcess) -> int:
    """Predict calls the model server took over gRPC (its request_latency counts)."""
    text = requests.get(
        f"http://127.0.0.1:{server.rest_ports[0]}/monitoring/prometheus/metrics", timeout=5
    ).text
    pattern = r'request_latency_count\{[^}]*API="predict",entrypoint="GRPC"[^}]*\} (\S+)'
    return sum(int(float(value)) for value in re.findall(pattern, text))


def check_answer(path: str, case: Case, reply: requests.Response) -> None:
    assert reply.status_code == case.status, reply.content[:2000]
    expected_type = case.response_type if case.status == 200 else "application/json"
    assert reply.headers.get("Content-Type") == expected_type
    if case.status == 200:
        assert reply.content == case.expected
        return
    doc = json.loads(reply.content)
    assert b"\n" not in reply.content.rstrip(b"\n"), reply.content  # one line
    # every error names the request: ours, and the model server's as it wrote it
    assert set(doc) == {"error", "request_id"}, doc
    assert doc["request_id"] == reply.headers["X-Request-Id"]
    if case.error is not None:  # ours
        assert doc["error"] == case.error
        return
    # the model server's or ours quoting a parser
    assert case.error_part in doc["error"]
    seen = MODEL_ERRORS.setdefault(case.name, {})
    seen[path] = (sorted(doc), doc["error"])
    assert len(set(map(str, seen.values()))) == 1, seen


# grouped by path (pytest keeps this order), so each stack starts once
PAIRS = [(path, case) for path in PATHS for case in CASES if path in case.paths]


@pytest.mark.parametrize(("path", "case"), PAIRS, ids=[f"{p}-{c.name}" for p, c in PAIRS])
def test_every_path_answers_every_case_alike(stacks, path, case):
    server = stacks.get(path)
    binary = bool(case.content_type and BINARY.match(case.content_type.lower()))
    counted = binary and case.status == 200  # (the model server counts what succeeds)
    before = grpc_predicts(server) if counted else 0
    check_answer(path, case, send(path, server, case))
    if counted:
        by_grpc = case.grpc and path != "user"
        assert grpc_predicts(server) - before == int(by_grpc), "Predict went the wrong way"
