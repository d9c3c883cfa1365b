"""Asynchronous endpoints' settings (docs/hosting-modes.md): SAGEMAKER_MODEL_SERVER_TIMEOUT is
the one deadline of an invocation, SAGEMAKER_MAX_REQUEST_SIZE and SAGEMAKER_MAX_RESPONSE_SIZE
the body limits; a body past nginx's memory buffer is spooled to a file and still answered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from conftest import serve_stack
from sagemaker_serving.launcher.nginx_config import BODY_IN_MEMORY
from slow_invocations import SLEEPER, sleep_everywhere

SLOW_SECONDS = 40


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("async_models")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    return root


def tfs_body(size: int) -> bytes:
    """A TF Serving request of exactly `size` bytes (padded with blanks)."""
    body = b'{"instances": [1.0, 2.0, 5.0]}'
    return body + b" " * (size - len(body))


def test_a_body_of_exactly_the_request_size_is_answered_from_nginx_s_file_and_one_more_is_413(
    model_dir, tmp_path
):
    limit = BODY_IN_MEMORY + 1_000_003  # past nginx's memory buffer: spooled to a file
    env = {"SAGEMAKER_MAX_REQUEST_SIZE": str(limit)}
    with serve_stack(model_dir, tmp_path, env) as server:
        url = f"{server.url}/invocations"
        small = requests.post(url, data=tfs_body(100), timeout=60)
        whole = requests.post(url, data=tfs_body(limit), timeout=60)
        assert (whole.status_code, whole.json()) == (200, small.json())
        assert small.json() == {"predictions": [3.5, 4.0, 5.5]}
        over = requests.post(url, data=tfs_body(limit + 1), timeout=60)
        assert over.status_code == 413
        assert over.headers["Content-Type"] == "application/json"
        assert f"over the limit of {limit} bytes" in over.json()["error"]


def test_an_answer_over_the_response_size_is_a_500_that_says_so(model_dir, tmp_path):
    answer = b'{"predictions": [3.5, 4.0, 5.5]}'
    with serve_stack(model_dir, tmp_path, {"SAGEMAKER_MAX_RESPONSE_SIZE": "34"}) as server:
        url = f"{server.url}/invocations"
        fits = requests.post(url, data=tfs_body(30), timeout=60)
        assert (fits.status_code, fits.content.strip()) == (200, answer)
        many = requests.post(url, data=b'{"instances": [1.0, 2.0, 5.0, 7.0]}', timeout=60)
        assert many.status_code == 500
        error = many.json()["error"]
        assert re.fullmatch(
            r"The answer is 3\d bytes, over SAGEMAKER_MAX_RESPONSE_SIZE \(34\)", error
        )


def test_the_model_server_timeout_is_the_invocation_s_deadline_and_ping_stays_quick(
    model_dir, tmp_path
):
    """A 40 s handler: 200 with SAGEMAKER_MODEL_SERVER_TIMEOUT=60, 504 JSON at 20 s with =20;
    /ping answers quickly meanwhile, with every handler thread busy."""
    (model_dir / "code").mkdir(exist_ok=True)
    (model_dir / "code" / "inference.py").write_text(SLEEPER)
    threads = 8  # one worker: requests spread over several unevenly, and would queue
    common = {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_GUNICORN_THREADS": str(threads)}
    for name in ("t60", "t20"):
        (tmp_path / name).mkdir()
    with (
        serve_stack(model_dir, tmp_path / "t60", {**common, "SAGEMAKER_MODEL_SERVER_TIMEOUT": "60"})
        as long,
        serve_stack(model_dir, tmp_path / "t20", {**common, "SAGEMAKER_MODEL_SERVER_TIMEOUT": "20"})
        as short,
    ):  # fmt: skip
        run = sleep_everywhere({"t60": long.url, "t20": short.url}, SLOW_SECONDS, threads)
    run.check_deadlines(SLOW_SECONDS, {"t60": 60, "t20": 20})
