"""User code that breaks the contract, said clearly: an inference.py that cannot be imported or
defines no handler stops serve with the file, the line and the error as its last line; a
handler that returns the wrong type is a JSON 500 naming it, what it returned and what was
expected. Both where handlers run in the service's workers and in processes of their own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import requests

from conftest import SERVE, free_port_range, run_serve, serve_stack

# code/lib with a module the service itself uses (crc32c): the handlers get processes of their
# own (environments/build.py), with no download
PLACES = {"workers": {}, "own processes": {"lib/crc32c.py": "VALUE = 'mine'\n"}}


def models_with(tmp_path: Path, code: str, extra: dict[str, str]) -> Path:
    import example_models as em

    models = tmp_path / "model"
    em.half_plus_three_tf1(models / "half_plus_three", versions=(1,))
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text(textwrap.dedent(code))
    for name, text in extra.items():
        (models / "code" / name).parent.mkdir(parents=True, exist_ok=True)
        (models / "code" / name).write_text(text)
    return models


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import json\n\ndef handler(:\n", "SyntaxError: invalid syntax (inference.py, line 3)"),
        (
            "import json\nimport no_such_module_anywhere\n",
            "ModuleNotFoundError: No module named 'no_such_module_anywhere' (inference.py, line 2)",
        ),
        (
            "def output_handler(response, context):\n    return response.content\n",
            "looked for handler, input_handler, output_handler",
        ),
    ],
    ids=["syntax", "import", "no-handler"],
)
def test_code_that_cannot_run_stops_serve_saying_where_and_why(tmp_path, place, code, expected):
    models = models_with(tmp_path, code, PLACES[place])
    result = run_serve(models, tmp_path, timeout=180)
    assert result.returncode == 1
    line = last_line(result.stderr)
    assert "cannot start:" in line and expected in line, result.stderr[-3000:]
    assert "inference.py" in line
    # said once, with the user's traceback at most once (not gunicorn's, once per worker)
    assert result.stderr.count("cannot start:") == 1, result.stderr
    assert result.stderr.count("Traceback (most recent call last)") <= 1, result.stderr


WRONG_TYPES = """
import json

def input_handler(data, context):
    body = data.read()
    if body == b"dict":
        return {"instances": [1.0]}
    return body

def output_handler(response, context):
    if context.custom_attributes == "answer=dict":
        return {"predictions": response.json()["predictions"]}
    if context.custom_attributes == "answer=int":
        return 42
    if context.custom_attributes == "answer=str":  # a bare body: no content type
        return "3.5"
    return response.content, "application/json"
"""


@pytest.mark.parametrize("place", list(PLACES))
def test_a_handler_that_returns_the_wrong_type_is_a_500_that_says_so(tmp_path, place):
    models = models_with(tmp_path, WRONG_TYPES, PLACES[place])
    cases = [
        (
            b"dict",
            None,
            "input_handler (inference.py, line 4) returned dict {'instances': [1.0]}"
            "; expected a str (JSON) or bytes-like request body for the model server",
        ),
        (
            b'{"instances": [1.0]}',
            "answer=dict",
            "output_handler (inference.py, line 10) "
            "returned dict {'predictions': [3.5]}; expected a (body, content_type) pair",
        ),
        (
            b'{"instances": [1.0]}',
            "answer=int",
            "output_handler (inference.py, line 10) "
            "returned int 42; expected a (body, content_type) pair",
        ),
        (
            b'{"instances": [1.0]}',
            "answer=str",
            "output_handler (inference.py, line 10) "
            "returned str '3.5'; expected a (body, content_type) pair",
        ),
    ]
    with serve_stack(models, tmp_path) as server:
        ok = requests.post(f"{server.url}/invocations", data='{"instances": [1.0]}', timeout=60)
        assert ok.status_code == 200 and ok.json() == {"predictions": [3.5]}
        for body, attributes, message in cases:
            headers = {"X-Amzn-SageMaker-Custom-Attributes": attributes} if attributes else {}
            reply = requests.post(
                f"{server.url}/invocations", data=body, headers=headers, timeout=60
            )
            assert reply.status_code == 500, reply.text
            assert reply.headers["Content-Type"] == "application/json"
            assert reply.json()["error"].startswith(message), reply.text
            assert str(tmp_path) not in reply.text  # no folders
        log = server.log()
    for _, _, message in cases:
        assert message in log
        following = log[log.index(message) :].splitlines()[1:40]  # with its traceback
        assert "Traceback (most recent call last):" in following, following


def _pips_using(temp: Path) -> list[psutil.Process]:
    """The pip processes whose command line names a path under temp."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "pip" in line and str(temp) in line:
            found.append(process)
    return found


def test_a_stop_while_pip_installs_ends_pip_and_leaves_nothing(tmp_path):
    """SIGTERM while requirements.txt installs from an index that never answers: serve ends
    at once, pip with it, and the folders start-up made are gone."""
    tarpit = socket.socket()
    tarpit.bind(("127.0.0.1", 0))
    tarpit.listen(16)  # takes connections, never answers
    index = f"http://127.0.0.1:{tarpit.getsockname()[1]}/simple"
    models = models_with(
        tmp_path,
        "def handler(data, context):\n    return data.read()\n",
        {"requirements.txt": f"--index-url {index}\nsome-package-nobody-has==1.0\n"},
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    port, high = free_port_range(5)
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
    }
    log = tmp_path / "serve.log"
    with tarpit, log.open("wb") as out:
        serve = subprocess.Popen(
            [SERVE, "--model-dir", str(models), "--host", "127.0.0.1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            pips = _pips_using(temp)
            while not pips and time.monotonic() < deadline:  # the log says so before pip starts
                assert serve.poll() is None, log.read_text()[-3000:]
                time.sleep(0.1)
                pips = _pips_using(temp)
            assert pips, "pip is not running: " + log.read_text()[-3000:]
            assert "installing" in log.read_text()
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(20) == 0
        finally:
            serve.kill()
    assert "stopped during start-up (SIGTERM)" in log.read_text()
    _, alive = psutil.wait_procs(pips, timeout=10)
    assert not alive, alive
    assert not list(temp.iterdir())  # the run directory start-up made


NEVER_RETURNS = """
import threading


def input_handler(data, context):
    if context.custom_attributes == "hang":
        threading.Event().wait()  # never returns
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
"""


ATTRIBUTES_HANG = {"X-Amzn-SageMaker-Custom-Attributes": "hang"}


def test_a_worker_whose_handler_threads_never_return_is_replaced(tmp_path):
    """With SAGEMAKER_GUNICORN_WORKER_CLASS=sync (one handler call at a time per worker), a
    handler that never returns held the worker for good: every later request was a 504 while
    /ping said 200. gunicorn's timeout ends such a worker in the AWS container; here the
    worker ends itself once its threads are all held past the deadline, and another starts."""
    models = models_with(tmp_path, NEVER_RETURNS, {})
    env = {
        "SAGEMAKER_GUNICORN_WORKER_CLASS": "sync",
        "SAGEMAKER_GUNICORN_WORKERS": "1",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "2",
    }
    body = '{"instances": [1.0]}'
    with serve_stack(models, tmp_path, env) as server:
        url = f"{server.url}/invocations"
        hung = requests.post(url, data=body, headers=ATTRIBUTES_HANG, timeout=30)
        assert hung.status_code == 504, hung.text
        deadline = time.monotonic() + 60
        while True:
            reply = requests.post(url, data=body, timeout=30)
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            assert reply.status_code in (502, 503, 504), reply.text
            time.sleep(0.5)
        assert reply.status_code == 200 and reply.json() == {"predictions": [3.5]}, reply.text
        assert "every handler thread of this worker holds a call" in server.log()


def test_a_worker_whose_event_loop_a_handler_never_gives_back_is_replaced(tmp_path):
    """A handler that proved quick runs on the worker's event loop (placement.py); one call of
    it that never returns held the loop for good (the worker kept telling gunicorn it was
    alive): every later request was a 504. Past its deadline the worker stops saying so, and
    gunicorn's timeout replaces it."""
    models = models_with(tmp_path, NEVER_RETURNS, {})
    env = {"SAGEMAKER_GUNICORN_WORKERS": "1", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "2"}
    body = '{"instances": [1.0]}'
    with serve_stack(models, tmp_path, env) as server:
        url = f"{server.url}/invocations"
        session = requests.Session()
        for sent in range(1, 801):  # quick calls (16 in a row): the handler moves to the loop
            assert session.post(url, data=body, timeout=30).status_code == 200
            if sent % 20 == 0 and "input_handler runs on the event loop" in server.log():
                break
        assert "input_handler runs on the event loop" in server.log()
        hung = requests.post(url, data=body, headers=ATTRIBUTES_HANG, timeout=30)
        assert hung.status_code == 504, hung.text
        deadline = time.monotonic() + 60
        while True:
            reply = requests.post(url, data=body, timeout=30)
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            assert reply.status_code in (502, 503, 504), reply.text
            time.sleep(0.5)
        assert reply.status_code == 200 and reply.json() == {"predictions": [3.5]}, reply.text
        assert "a handler has held this worker's event loop long past" in server.log()
