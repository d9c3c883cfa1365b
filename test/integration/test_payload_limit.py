"""The payload limit (SAGEMAKER_MAX_PAYLOAD_IN_MB) is the client's: a body of exactly the limit
is served on every path and in every format, one byte over is the documented 413 JSON, with
Content-Length and chunked alike; our own internal requests (the fast path's TF Serving body,
larger than the client's) are never held to it. And a Batch Transform job that fills its
requests up to MaxPayloadInMB succeeds."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import VENV_BIN, ServeProcess, serve_stack
from raw_http import chunked as chunked_body
from raw_http import raw, split_reply
from sagemaker_serving.formats.tfrecord import frame_tfrecord

LIMIT_MB = 1
LIMIT = LIMIT_MB * 1024 * 1024
ENV = {
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": str(LIMIT_MB),
    "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
    "SAGEMAKER_GUNICORN_WORKERS": "1",
}
CA = "X-Amzn-SageMaker-Custom-Attributes"
# the built-in formats through user code: what the handlers return is what the container does
DEFAULT_HANDLERS = """
from sagemaker_serving import default_input_handler, default_output_handler


def input_handler(data, context):
    return default_input_handler(data, context)


def output_handler(response, context):
    return default_output_handler(response, context)
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("payload_limit_models")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    em.string_input(root / "strings")
    em.example_input(root / "examples")
    return root


@pytest.fixture(scope="module")
def fast_path(model_dir, tmp_path_factory):
    with serve_stack(model_dir, tmp_path_factory.mktemp("limit_fast"), ENV) as server:
        yield server


@pytest.fixture(scope="module")
def user_code(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("limit_user_code")
    shutil.copytree(model_dir, root / "model")
    (root / "model" / "code").mkdir()
    (root / "model" / "code" / "inference.py").write_text(DEFAULT_HANDLERS)
    with serve_stack(root / "model", root, ENV) as server:
        yield server


@pytest.fixture(scope="module")
def multi_model(model_dir, tmp_path_factory):
    env = {**ENV, "SAGEMAKER_MULTI_MODEL": "true"}
    with serve_stack(model_dir, tmp_path_factory.mktemp("limit_mme"), env) as server:
        for name in ("half_plus_three", "strings", "examples"):
            body = {"model_name": name, "url": str(model_dir / name)}
            reply = requests.post(f"{server.url}/models", json=body, timeout=120)
            assert reply.status_code == 200, reply.text
        yield server


PATHS = ("fast_path", "user_code", "multi_model")


# ----- bodies of exactly n bytes, in each format ---------------------------------------------


def json_list(n: int) -> bytes:
    """One instance (a JSON list), padded with whitespace: the fast path wraps it (+15 bytes)."""
    body = b"[1.0, 2.0, 5.0]"
    return body + b" " * (n - len(body))


def json_request(n: int) -> bytes:
    """A TF Serving request, passed through as it is."""
    body = b'{"instances": [1.0, 2.0, 5.0]}'
    return body + b" " * (n - len(body))


def number_lines(n: int) -> bytes:
    """Rows of one number, as Batch Transform packs them (CSV and JSON Lines alike)."""
    rows = (n - 8) // 4
    rest = n - 4 * rows  # 8..11 bytes: one last row `1.00...0\n`
    return b"1.0\n" * rows + b"1." + b"0" * (rest - 3) + b"\n"


def image(n: int) -> bytes:
    return b"\xab" * n


def npy(n: int) -> bytes:
    """A .npy of one byte string (the strings model's input), exactly n bytes long."""
    size = n - 128
    for _ in range(4):
        out = io.BytesIO()
        np.save(out, np.array([b"a" * size]))
        if len(out.getvalue()) == n:
            return out.getvalue()
        size += n - len(out.getvalue())
    raise AssertionError(f"no .npy of exactly {n} bytes")


def tfexample(n: int) -> bytes:
    """One bare tf.Example (x = 1.0, and a feature the model does not read) of exactly n
    bytes."""
    import tensorflow as tf

    def example(pad: int, key: str) -> bytes:
        feature = {
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0])),
            key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"p" * pad])),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    estimate = n - len(example(0, "pad"))
    for key in ("pad", "pad_"):  # nested length prefixes grow in steps: a longer key fills in
        for pad in range(max(0, estimate - 16), estimate + 1):
            body = example(pad, key)
            if len(body) == n:
                return body
    raise AssertionError(f"no tf.Example of exactly {n} bytes")


def tfrecords(n: int) -> bytes:
    """TFRecord frames of tf.Examples (a MultiRecord batch) of exactly n bytes."""
    first = frame_tfrecord(tfexample(64))
    return first + frame_tfrecord(tfexample(n - len(first) - 16))


# name -> (Content-Type, Accept, model, body of n bytes, what the answer's JSON holds)
FORMATS: dict[str, tuple[str, str, str, Callable[[int], bytes], Callable[[int, str], None]]] = {}


def _json_answer(expected: Callable[[int], list]) -> Callable[[int, str], None]:
    def check(n: int, text: str) -> None:
        predictions = json.loads(text)["predictions"]
        want = expected(n)
        assert predictions[: len(want)] == want, text[:300]

    return check


def _lines_answer(n: int, text: str) -> None:
    lines = text.splitlines()
    assert len(lines) == number_lines(n).count(b"\n"), (len(lines), text[:200])
    assert {float(x) for x in lines} == {3.5}


FORMATS["json-list"] = ("application/json", "application/json", "half_plus_three", json_list,
                        _json_answer(lambda n: [[3.5, 4.0, 5.5]]))  # fmt: skip
FORMATS["json-request"] = ("application/json", "application/json", "half_plus_three",
                           json_request, _json_answer(lambda n: [3.5, 4.0, 5.5]))  # fmt: skip
FORMATS["csv"] = ("text/csv", "text/csv", "half_plus_three", number_lines, _lines_answer)
FORMATS["jsonlines"] = ("application/jsonlines", "application/jsonlines", "half_plus_three",
                        number_lines, _lines_answer)  # fmt: skip
FORMATS["x-image"] = ("application/x-image", "application/json", "strings", image,
                      _json_answer(lambda n: [n]))  # fmt: skip
FORMATS["x-npy"] = ("application/x-npy", "application/json", "strings", npy,
                    _json_answer(lambda n: [n - 128]))  # fmt: skip
FORMATS["x-tfexample"] = ("application/x-tfexample", "application/json", "examples", tfexample,
                          _json_answer(lambda n: [[2.5]]))  # fmt: skip
FORMATS["x-tfexample-records"] = ("application/x-tfexample", "application/json", "examples",
                                  tfrecords, _json_answer(lambda n: [[2.5], [2.5]]))  # fmt: skip


# ----- one exchange, with Content-Length or chunked ------------------------------------------


def exchange(
    server: ServeProcess, path: str, model: str, content_type: str, accept: str, body: bytes,
    chunk: int,
) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """One request; `chunk` > 0: the body in chunks of that size, else with Content-Length."""
    if path == "multi_model":
        target, routing = f"/models/{model}/invoke", b""
    else:
        target, routing = "/invocations", f"{CA}: tfs-model-name={model}\r\n".encode()
    head = (
        f"POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
        f"Accept: {accept}\r\nConnection: close\r\n"
    ).encode() + routing
    if chunk:
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked_body(body, chunk)
    else:
        data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    return split_reply(raw(server.port, data, timeout=120))


# chunked: the framing of small chunks takes room in nginx's body buffer too
@pytest.mark.parametrize("chunk", [0, 65536, 4096], ids=["content-length", "chunked", "4k-chunks"])
@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("path", PATHS)
def test_bodies_up_to_the_limit_are_served_and_one_byte_over_is_413_json(
    request, path, name, chunk
):
    server = request.getfixturevalue(path)
    content_type, accept, model, make, check = FORMATS[name]
    for n in (LIMIT - 1, LIMIT):
        body = make(n)
        assert len(body) == n
        status, headers, answer = exchange(server, path, model, content_type, accept, body,
                                           chunk)  # fmt: skip
        assert status == 200, (n, answer[:500])
        check(n, answer.decode())
    body = make(LIMIT + 1)
    assert len(body) == LIMIT + 1
    status, headers, answer = exchange(server, path, model, content_type, accept, body, chunk)
    assert status == 413, answer[:500]
    assert headers["content-type"] == "application/json"
    doc = json.loads(answer)
    assert doc["error"].startswith(
        "Payload Too Large: the request body is over the limit of 1048576 bytes"
    )
    assert b"<html" not in answer.lower()


# ----- Batch Transform: MultiRecord requests filled up to MaxPayloadInMB --------------------


@pytest.mark.parametrize(
    ("content_type", "accept"),
    [("text/csv", "text/csv"), ("application/jsonlines", "application/jsonlines")],
)
def test_a_batch_transform_job_that_fills_its_requests_succeeds(
    fast_path, tmp_path, content_type, accept
):
    """The issue's job: MultiRecord requests of up to 1 MiB (the runner fills each to just under
    the limit) on a container with SAGEMAKER_MAX_PAYLOAD_IN_MB=1."""
    rows = [f"{i % 97}.5" for i in range(300_000)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "big.data").write_text("\n".join(rows) + "\n")
    assert (tmp_path / "in" / "big.data").stat().st_size > LIMIT  # the first request is full
    summary_path = tmp_path / "summary.json"
    result = subprocess.run(
        [
            str(VENV_BIN / "tfs-batch-transform"), "--endpoint", fast_path.url,
            "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--content-type", content_type, "--accept", accept, "--split-type", "Line",
            "--assemble-with", "Line", "--batch-strategy", "MultiRecord",
            "--max-payload-in-mb", str(LIMIT_MB), "--summary-json", str(summary_path),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["requests"] >= 2 and summary["records"] == len(rows), summary
    out = (tmp_path / "out" / "big.data.out").read_text().splitlines()
    if content_type == "text/csv":
        values = [float(row[0]) for row in csv.reader(out)]
    else:
        values = [float(json.loads(line)) for line in out]
    assert values == [0.5 * float(x) + 3 for x in rows]
