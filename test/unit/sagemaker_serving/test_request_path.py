"""The modules a `POST /invocations` body passes through on the user-code path (input_handler,
the model server, output_handler), traced with sys.setprofile: few, top-down. The service's
pipeline (service/pipeline.py) is entered once and stays on the stack; it calls each layer
below in turn (the user's input_handler and its contract, the model server's client, the
user's output_handler), and nothing below calls back up into it.

Measured this way: 13 modules and 8 folder entries before the chain moved to
user_code/chain.py (service twice, tfs_client five times); 12 modules and 4 entries with it,
where user_code ran the chain and called back into the service for every step (entries that
this trace did not count: the service was still on the stack); 11 modules now, the service
entered once and every other entry made from it."""

from __future__ import annotations

import sys
from pathlib import Path

import sagemaker_serving

PACKAGE = Path(sagemaker_serving.__file__).resolve().parent

HANDLERS = """
import json

def input_handler(data, context):
    return json.dumps({"instances": [float(x) for x in data.read().decode().split()]})

def output_handler(response, context):
    return response.content, context.accept_header
"""


def trace(call) -> tuple[list[str], list[tuple[str, str]]]:
    """The sagemaker_serving modules whose functions `call` enters (each once, in the order
    first entered), and the folders it enters, each with the folder that entered it: a folder
    is entered when one of its functions is called while none of its functions is on the
    stack ('' is the package's top). A coroutine resumed after an await is the same call going
    on, not a new one."""
    modules: list[str] = []
    entries: list[tuple[str, str]] = []
    stack: list[str] = []  # the folder of each of our frames on the stack
    started: list = []  # every frame of ours called (kept, so that no id is reused)
    started_ids: set[int] = set()

    def profile(frame, event, arg):
        path = Path(frame.f_code.co_filename)
        if event not in ("call", "return") or not path.is_relative_to(PACKAGE):
            return
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        folder = module.rpartition(".")[0]
        if event == "call":
            if module not in modules:
                modules.append(module)
            if id(frame) not in started_ids:
                started.append(frame)
                started_ids.add(id(frame))
                if folder not in stack:
                    entries.append((folder, stack[-1] if stack else "-"))
            stack.append(folder)
        elif stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return modules, entries


def test_the_user_code_path_is_short_and_top_down(make_app, tfs_server):
    client = make_app(tfs_server, HANDLERS)

    def invoke():
        reply = client.simulate_post(
            "/invocations", body=b"1 2 5", headers={"Content-Type": "text/plain"}
        )
        assert reply.status_code == 200, reply.text
        assert reply.json == {"predictions": [2.5, 3.0, 4.5]}

    invoke()  # imports and connections made
    modules, entries = trace(invoke)
    print(f"\n{len(modules)} modules: {modules}\nfolders entered (by): {entries}")
    folders = [folder for folder, _ in entries]
    assert folders.count("service") == 1, entries  # the pipeline, entered once
    below = entries[folders.index("service") + 1 :]
    assert below and all(by == "service" for _, by in below), entries  # no call back up
    assert [f for f, _ in below] == ["user_code", "tfs_client", "user_code"], entries
    assert len(modules) <= 11, modules  # 12 before
