"""Where user handlers run, through the whole stack with one service worker: quick ones move
onto the event loop, a handler that then stalls it goes back to the threads without its worker
being killed, handlers that wait run side by side, and `sync` runs one call at a time."""

from __future__ import annotations

import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import serve_stack

CODE = """
import json
import threading
import time

running = most = 0
lock = threading.Lock()


def input_handler(data, context):
    global running, most
    with lock:
        running += 1
        most = max(most, running)
    try:
        if context.request_content_type == "application/x-wait":
            time.sleep(float(data.read()))
            return json.dumps({"instances": [1.0]})
        return data.read()
    finally:
        with lock:
            running -= 1


def output_handler(response, context):
    if context.accept_header == "application/x-most":
        return json.dumps({"most": most}), "application/json"
    return response.content, "application/json"
"""
QUICK = '{"instances": [1.0]}'


def stack(tmp_path_factory, **env: str):
    import example_models as em

    root = tmp_path_factory.mktemp("placement")
    models = root / "model"
    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text(textwrap.dedent(CODE))
    settings = {
        "SAGEMAKER_GUNICORN_WORKERS": "1",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "2",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "10",
        **env,
    }
    return serve_stack(models, root, settings)


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory):
    with stack(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory):
    with stack(tmp_path_factory, SAGEMAKER_GUNICORN_WORKER_CLASS="sync") as server:
        yield server


def post(server, body: str, content_type: str = "application/json", accept: str = "") -> dict:
    headers = {"Content-Type": content_type, **({"Accept": accept} if accept else {})}
    reply = requests.post(f"{server.url}/invocations", data=body, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def logged(server, text: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while text not in server.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def most_at_once(server, content_type: str, body: str, requests_at_once: int) -> int:
    with ThreadPoolExecutor(requests_at_once) as pool:
        list(pool.map(lambda _: post(server, body, content_type), range(requests_at_once)))
    return post(server, QUICK, accept="application/x-most")["most"]


def test_handlers_that_wait_run_side_by_side_in_one_worker(adaptive):
    assert most_at_once(adaptive, "application/x-wait", "0.5", 4) > 1


def test_quick_handlers_move_to_the_loop_and_one_that_stalls_it_moves_back(adaptive):
    for _ in range(40):
        assert post(adaptive, QUICK) == {"predictions": [3.5]}
    assert logged(adaptive, "input_handler runs on the event loop")
    # longer than the worker timeout (2 s), on the loop: the worker lives on and answers
    assert post(adaptive, "3", "application/x-wait") == {"predictions": [3.5]}
    assert logged(adaptive, "input_handler runs on threads from now on")
    assert "WORKER TIMEOUT" not in adaptive.log()
    assert post(adaptive, QUICK) == {"predictions": [3.5]}


def test_sync_runs_one_handler_call_at_a_time(one_at_a_time):
    assert most_at_once(one_at_a_time, "application/x-wait", "0.3", 4) == 1
