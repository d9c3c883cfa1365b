"""User code as a guest, through the whole native stack, in the service's workers and in handler
processes of their own: code that forks (a child that returns or raises out of the handler,
multiprocessing with the fork method) while two clients alternate requests: every answer is its
own client's, and no copy of a worker is left behind; an answer of many MiB costs the service
about its size."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path

import psutil
import pytest
import requests

from conftest import command_line, serve_stack

pytestmark = pytest.mark.slow

REQUESTS = 500  # per handler and placement, alternating between the two clients

INFERENCE = """
import json
import multiprocessing
import os
import sys


def _child_work():
    pass


def input_handler(data, context):
    doc = json.loads(data.read())
    if doc["fork"] == "exit":  # the child's sys.exit(0) is a SystemExit in the handler
        if os.fork() == 0:
            sys.exit(0)
    elif doc["fork"] == "raise":
        if os.fork() == 0:
            raise RuntimeError("raised in the forked child")
    elif doc["fork"] == "multiprocessing":
        child = multiprocessing.get_context("fork").Process(target=_child_work)
        child.start()
        child.join(30)
    return json.dumps({"instances": [doc["x"]]})


def output_handler(response, context):
    size = int(context.custom_attributes or 0)  # an answer of that many MiB
    if size:
        return b"x" * (size << 20), "application/octet-stream"
    return response.content, "application/json"
"""

PLACEMENTS = {
    "workers": {},
    # a module the service itself uses, in code/lib: handler processes of their own
    "handler-processes": {"lib/crc32c.py": "VALUE = 1\n"},
}


def model_dir(root: Path, extra: dict[str, str]) -> Path:
    import example_models as em

    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    code = root / "code"
    code.mkdir()
    (code / "inference.py").write_text(textwrap.dedent(INFERENCE))
    for name, text in extra.items():
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_text(text)
    return root


def live_processes(pid: int) -> set[int]:
    """serve and every live (not zombie) process under it."""
    root = psutil.Process(pid)
    found = set()
    for proc in [root, *root.children(recursive=True)]:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.add(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def client(url: str, fork: str, base: float, count: int, start: threading.Barrier, out: list):
    """`count` requests with values of this client's own; what each answered."""
    session = requests.Session()
    start.wait(30)
    for i in range(count):
        x = base + i
        body = json.dumps({"fork": fork, "x": x})
        try:
            resp = session.post(f"{url}/invocations", data=body, timeout=30)
            answer = resp.json().get("predictions") if resp.status_code == 200 else resp.text
        except requests.RequestException as exc:
            resp, answer = None, repr(exc)
        out.append((x, resp.status_code if resp is not None else None, answer))


@pytest.fixture(scope="module", params=list(PLACEMENTS))
def forking_stack(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"forks-{request.param}")
    models = model_dir(tmp / "model", PLACEMENTS[request.param])
    with serve_stack(models, tmp, {"SAGEMAKER_GUNICORN_WORKERS": "2"}) as server:
        yield request.param, server


@pytest.mark.parametrize("fork", ["exit", "raise", "multiprocessing"])
def test_every_answer_is_its_own_clients_when_a_handler_forks(forking_stack, fork):
    placement, server = forking_stack
    before = live_processes(server.proc.pid)
    results: dict[str, list] = {"a": [], "b": []}
    start = threading.Barrier(2)
    threads = [
        threading.Thread(target=client, args=(server.url, fork, base, REQUESTS // 2, start, out))
        for base, out in ((1000.0, results["a"]), (5000.0, results["b"]))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    wrong = [
        (name, x, status, answer)
        for name, answers in results.items()
        for x, status, answer in answers
        if status != 200 or answer != [0.5 * x + 3.0]
    ]
    assert len(results["a"]) + len(results["b"]) == REQUESTS
    assert not wrong, f"{placement}: {len(wrong)} answers not the client's own: {wrong[:5]}"
    assert "forked child" not in server.log(), "the child's exception reached the log"
    # a child never lives on as a copy of a worker: the stack's processes are the same
    assert live_processes(server.proc.pid) == before


def peak_rss(pid: int) -> int:
    """The process's peak resident memory since its last reset (bytes)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_large_answer_costs_the_service_about_its_size(forking_stack):
    """The answer crosses from a handler process in pieces into one buffer, and goes out to
    nginx in pieces as it takes them (before: 3.1x its size in the service's worker)."""
    placement, server = forking_stack
    size_mib = 96
    service = [p for p in psutil.Process(server.proc.pid).children(recursive=True)
               if "sagemaker_serving.python_service" in command_line(p)]  # fmt: skip
    workers = [w for p in service for w in p.children() if command_line(w)]  # no zombie
    before = {}
    for worker in workers:
        with open(f"/proc/{worker.pid}/clear_refs", "w") as refs:
            refs.write("5")  # the peak starts again from now
        before[worker.pid] = worker.memory_info().rss
    headers = {"X-Amzn-SageMaker-Custom-Attributes": str(size_mib)}
    body = json.dumps({"fork": "none", "x": 1.0})
    reply = requests.post(f"{server.url}/invocations", data=body, headers=headers, timeout=120)
    assert reply.status_code == 200 and len(reply.content) == size_mib << 20
    growth = max(peak_rss(pid) - rss for pid, rss in before.items())
    ratio = growth / (size_mib << 20)
    print(f"{placement}: the service's worker grew {ratio:.2f}x the answer's size at its peak")
    # in the workers, the handler's own bytes are the one copy; in handler processes, the
    # buffer the answer arrives in
    assert ratio < 1.6, ratio
