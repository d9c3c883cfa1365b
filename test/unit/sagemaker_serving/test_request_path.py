"""The modules a `POST /invocations` body passes through on the user-code path (input_handler,
the model server, output_handler), traced with sys.setprofile: few, and no folder of the
service entered twice (a body goes down through the layers and back, never to and fro).

Measured this way before the chain moved to user_code/chain.py: 13 modules, 8 folder entries
(service twice, tfs_client five times: the context's four look-ups and the predict,
environments once); after: 12 modules, 4 entries (the package's top, service, user_code,
tfs_client)."""

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


def trace(call) -> tuple[list[str], list[str]]:
    """The sagemaker_serving modules whose functions `call` enters (each once, in the order
    first entered), and the folders it enters: a folder is entered when one of its functions is
    called while none of its functions is on the stack ('' is the package's top). A coroutine
    resumed after an await is the same call going on, not a new one."""
    modules: list[str] = []
    entries: list[str] = []
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
                    entries.append(folder)
            stack.append(folder)
        elif stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return modules, entries


def test_the_user_code_path_is_short_and_enters_no_folder_twice(make_app, tfs_server):
    client = make_app(tfs_server, HANDLERS)

    def invoke():
        reply = client.simulate_post(
            "/invocations", body=b"1 2 5", headers={"Content-Type": "text/plain"}
        )
        assert reply.status_code == 200, reply.text
        assert reply.json == {"predictions": [2.5, 3.0, 4.5]}

    invoke()  # imports and connections made
    modules, entries = trace(invoke)
    print(f"\n{len(modules)} modules: {modules}\nfolders entered: {entries}")
    twice = sorted({f for f in entries if entries.count(f) > 1})
    assert not twice, f"folders entered more than once: {twice} ({' -> '.join(entries)})"
    assert len(modules) <= 12, modules  # 13 before
