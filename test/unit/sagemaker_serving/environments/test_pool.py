"""Handler processes (host.py) started, called (remote.py), crashed, restarted and stopped
(pool.py): real processes on a unix socket; the model server they call is a loopback HTTP
server that echoes what it is sent (status 400 for a request that says "fail-400")."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from sagemaker_serving.config import log_setup
from sagemaker_serving.environments import pool
from sagemaker_serving.environments.remote import HandlerPool, HandlerProcessError
from sagemaker_serving.errors import StatusError
from sagemaker_serving.user_code.handler_api import Context

CODE = """
import ctypes, json, os, time
from sagemaker_serving import HandlerError, default_input_handler, default_output_handler

def input_handler(data, context):
    body = data.read()
    if body == b"crash":
        ctypes.string_at(0)  # SIGSEGV, as a broken extension would
    if body == b"slow":
        time.sleep(5)
    if body == b"refuse":
        raise HandlerError("no thanks", 422)
    if body == b"wrong":
        return {"instances": [1]}
    if body == b"builtin":
        return default_input_handler(data, context)
    if body == b"exit":
        raise SystemExit(3)
    if body == b"status 200":
        raise HandlerError("not really ok", 200)
    if body == b"long":
        raise HandlerError("x" * 2_000_000, 422)
    if body.startswith(b"sleep "):
        time.sleep(float(body.split()[1]))
    if body.startswith(b"fork "):  # the pool's sockets held here, and in a child forked here
        from sagemaker_serving.user_code.fork_guard import sockets_bound_to
        path = body[5:].decode()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(write, b"%d" % len(sockets_bound_to(path)))
            os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
        return json.dumps({"here": len(sockets_bound_to(path)), "child": int(os.read(read, 9))})
    return json.dumps({"pid": os.getpid(), "body": body.decode(), "id": context.request_id})

def output_handler(response, context):
    if response.status_code != 200:
        return default_output_handler(response, context)
    return response.text.upper(), "text/plain"
"""


class _Echo(http.server.BaseHTTPRequestHandler):
    """A model server that answers a predict with the request it got."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = 400 if b"fail-400" in body else 200
        answer = b'{"error": "failed"}' if status == 400 else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module", autouse=True)
def model_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    MODEL_SERVER[:] = [f"http://127.0.0.1:{server.server_address[1]}/v1/models/m:predict"]
    try:
        yield MODEL_SERVER[0]
    finally:
        server.shutdown()
        server.server_close()


MODEL_SERVER: list[str] = []


def context(seconds: float = 30.0, **fields) -> Context:
    values = dict.fromkeys(Context._fields)
    values.update(
        grpc_port=9000, request_id="rid-1", accept_header="application/json", timeout=seconds
    )
    values["rest_uri"] = MODEL_SERVER[0]
    values["deadline"] = time.monotonic() + seconds
    values.update(fields)
    return Context(**values)


def spec_for(tmp_path: Path, code: str, processes: int = 2) -> pool.PoolSpec:
    code_dir = tmp_path / "code"
    code_dir.mkdir(parents=True, exist_ok=True)
    (code_dir / "inference.py").write_text(textwrap.dedent(code))
    return pool.PoolSpec(
        pool.new_pool_dir(), sys.executable, code_dir, (str(code_dir),), processes=processes
    )


@pytest.fixture
def running(tmp_path) -> Iterator[tuple[pool.PoolSpec, subprocess.Popen]]:
    spec = spec_for(tmp_path, CODE)
    lifeline, keep = os.pipe()
    proc = subprocess.Popen(
        pool.command(spec, lifeline), env=pool.environment(os.environ), pass_fds=(lifeline,)
    )
    os.close(lifeline)
    try:
        yield spec, proc
    finally:
        os.close(keep)  # serve is gone: the pool must end by itself
        try:
            proc.wait(15)
        finally:
            proc.kill()
            pool.stop(spec.directory, time.monotonic() + 5)


async def callbacks(fn, header, body, ctx):
    if fn == "default_input_handler":
        return {"ok": True}, b"built-in:" + body
    return {"ok": True, "content_type": "application/json"}, b'{"error": "from the service"}'


def call(spec, body, ctx=None, size=4) -> tuple[bytes, str | None]:
    """A request through the pool's handlers: the answer's body and content type."""

    async def go():
        remote = HandlerPool(spec.socket, ("input_handler", "output_handler"), size=size)
        try:
            reply, data = await remote.run(body, ctx or context(), callbacks)
            return bytes(data), reply.get("content_type")
        finally:
            remote.close()

    return asyncio.run(go())


def test_handlers_run_in_the_pool_with_the_requests_context(running):
    spec, proc = running
    assert pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None) == [
        "input_handler",
        "output_handler",
    ]
    body, content_type = call(spec, b"hello")  # input_handler -> the model -> output_handler
    assert content_type == "text/plain" and b'"BODY": "HELLO"' in body and b'"ID": "RID-1"' in body


def test_the_default_handlers_ask_the_service(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    assert call(spec, b"builtin") == (b"BUILT-IN:", "text/plain")  # its data was read
    body, content_type = call(spec, b"fail-400")  # output_handler leaves an error to it
    assert (body, content_type) == (b'{"error": "from the service"}', "application/json")


def test_a_child_the_handlers_fork_holds_none_of_the_pools_sockets(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    held = json.loads(call(spec, b"fork " + spec.socket.encode())[0])
    assert held["HERE"] >= 2 and held["CHILD"] == 0  # the listener and the call's connection


def test_errors_keep_their_status_and_a_broken_contract_is_a_500(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    with pytest.raises(StatusError) as refused:
        call(spec, b"refuse")
    assert (refused.value.status, refused.value.message) == (422, "no thanks")
    with pytest.raises(StatusError) as wrong:
        call(spec, b"wrong")
    assert wrong.value.status == 500
    assert wrong.value.message.startswith("input_handler (inference.py, line 5) returned dict")


def test_a_crash_is_a_500_and_the_pool_starts_another_process(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    with pytest.raises(HandlerProcessError) as crashed:
        call(spec, b"crash")
    assert crashed.value.status == 500
    assert "ended while running the handlers" in crashed.value.message
    deadline = time.monotonic() + 60
    pids = set()
    while len(pids) < 2 and time.monotonic() < deadline:  # both processes answer again
        try:
            pids.add(bytes(call(spec, b"x")[0]).split(b",")[0])
        except StatusError:
            time.sleep(0.1)
    assert len(pids) == 2 and proc.poll() is None


def test_a_call_the_pool_is_stopped_under_is_a_503_saying_so_not_a_crash(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    stopper = threading.Timer(0.5, pool.stop, (spec.directory, time.monotonic() + 1))
    stopper.start()  # the model is unloaded while its call runs past the pool's drain
    try:
        with pytest.raises(HandlerProcessError) as stopped:
            call(spec, b"sleep 10")
    finally:
        stopper.join()
    assert (stopped.value.status, stopped.value.message) == (
        503,
        "The handler processes were stopped before the handlers finished (the model was "
        "unloaded, or the endpoint is stopping)",
    )


def test_a_call_past_the_deadline_is_a_504(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    with pytest.raises(HandlerProcessError) as slow:
        call(spec, b"slow", context(seconds=0.5))
    assert slow.value.status == 504


def test_handlers_that_never_return_cannot_pile_up_threads(tmp_path):
    """Each call past its deadline keeps its thread in the handler process (a handler that
    never returns); once MAX_ABANDONED_CALLS of them do, the process ends and another starts,
    so its threads stay bounded and calls are answered again."""
    from sagemaker_serving.environments.host import MAX_ABANDONED_CALLS

    spec = spec_for(tmp_path, CODE, processes=1)
    proc = subprocess.Popen(pool.command(spec, None), env=pool.environment(os.environ))
    try:
        pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
        first = psutil.Process(proc.pid).children()[0]
        threads = []
        for _ in range(3 * MAX_ABANDONED_CALLS):
            with pytest.raises(HandlerProcessError):
                call(spec, b"sleep 3600", context(seconds=0.05), size=1)
            workers = psutil.Process(proc.pid).children()
            threads += [w.num_threads() for w in workers if w.is_running()]
        assert max(threads) <= MAX_ABANDONED_CALLS + 3, threads  # + the main and idle ones
        assert not first.is_running()  # it ended; the master started another
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(HandlerProcessError):
                assert b'"BODY": "X"' in call(spec, b"x")[0]
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the pool did not answer again")
    finally:
        proc.terminate()
        proc.wait(15)
        pool.stop(spec.directory, time.monotonic() + 1)


def test_a_socket_taken_over_by_another_pool_is_detected(tmp_path):
    """Another pool's socket put in this pool's place (as a bug in another model's code
    could): no call goes to it, /ping says the pool does not answer, and the pool is marked
    for a restart."""
    a, b = spec_for(tmp_path / "a", CODE, 1), spec_for(tmp_path / "b", CODE, 1)
    procs = [
        subprocess.Popen(pool.command(s, None), env=pool.environment(os.environ)) for s in (a, b)
    ]
    try:
        for spec, proc in zip((a, b), procs, strict=True):
            pool.wait_ready(spec.directory, time.monotonic() + 60, lambda p=proc: p.poll() is None)
        assert b'"BODY": "MINE"' in call(a, b"mine")[0]
        os.replace(b.socket, a.socket)  # a's path now leads to b's processes

        async def go():
            remote = HandlerPool(a.socket, ("input_handler",), size=1)
            with pytest.raises(HandlerProcessError) as taken:
                await remote.run(b"x", context(), callbacks)
            return taken.value, remote.unreachable, await remote.alive()

        error, unreachable, alive = asyncio.run(go())
        assert error.status == 503 and "another process" in error.message
        assert unreachable and not alive
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(15)
        for spec in (a, b):
            pool.stop(spec.directory, time.monotonic() + 1)


def test_an_unreachable_pool_is_a_503(tmp_path):
    spec = spec_for(tmp_path, CODE)
    with pytest.raises(HandlerProcessError) as down:
        call(spec, b"x")
    assert down.value.status == 503
    pool.stop(spec.directory, time.monotonic() + 1)


def test_an_import_error_names_the_file_and_line(tmp_path):
    spec = spec_for(tmp_path, "import json\nimport no_such_module_here\n")
    proc = subprocess.Popen(pool.command(spec, None), env=pool.environment(os.environ))
    try:
        with pytest.raises(pool.PoolError) as info:
            pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
        message = str(info.value)
        assert "ModuleNotFoundError: No module named 'no_such_module_here'" in message
        assert message.endswith("(inference.py, line 2)")
        assert proc.wait(15) == 3
    finally:
        proc.kill()
        pool.stop(spec.directory, time.monotonic() + 1)


def test_a_detached_pool_outlives_its_starter_and_stops(tmp_path):
    spec = spec_for(tmp_path, CODE, processes=1)
    functions = pool.start_detached(spec, None, time.monotonic() + 60)
    assert functions == ["input_handler", "output_handler"]
    master = int((spec.directory / "pid").read_text())
    assert os.getpgid(master) == master  # a session of its own
    assert b"HELLO" in call(spec, b"hello")[0]
    pool.stop(spec.directory, time.monotonic() + 10)
    assert not spec.directory.exists()
    assert gone(master)


def gone(pid: int) -> bool:
    """Ended (a zombie counts: init reaps orphans when it gets to them)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def test_errors_are_brief_and_a_status_outside_4xx_5xx_is_a_500(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    with pytest.raises(StatusError) as long:
        call(spec, b"long")
    assert long.value.status == 422 and len(long.value.message) < 5000
    with pytest.raises(StatusError) as ok:
        call(spec, b"status 200")
    assert ok.value.status == 500
    with pytest.raises(StatusError) as exited:
        call(spec, b"exit")
    assert (exited.value.status, exited.value.message) == (500, "SystemExit: 3")
    assert call(spec, b"after")[0]  # the process served on


def test_waiting_for_a_free_connection_ends_at_the_deadline(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)

    async def two_calls():
        remote = HandlerPool(spec.socket, ("input_handler",), size=1)
        slow = remote.run(b"sleep 3", context(10), callbacks)
        queued = remote.run(b"x", context(0.5), callbacks)
        results = await asyncio.gather(slow, queued, return_exceptions=True)
        remote.close()
        return results

    slow, queued = asyncio.run(two_calls())
    assert not isinstance(slow, BaseException)
    assert isinstance(queued, HandlerProcessError) and queued.status == 504


def test_alive_means_a_handler_process_answers(running):
    spec, proc = running
    pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
    remote = HandlerPool(spec.socket, ("input_handler",))
    assert asyncio.run(remote.alive())
    workers = psutil.Process(proc.pid).children()
    assert len(workers) == 2
    for worker in workers:
        worker.suspend()  # the socket still takes connections; nobody answers
    try:
        assert not asyncio.run(remote.alive())
    finally:
        for worker in workers:
            worker.resume()
    assert asyncio.run(remote.alive())


def test_a_stop_lets_the_call_in_progress_answer(tmp_path):
    spec = spec_for(tmp_path, CODE, processes=1)
    pool.start_detached(spec, None, time.monotonic() + 60)
    answers = []

    def slow_call():
        answers.append(call(spec, b"sleep 1.5"))

    thread = threading.Thread(target=slow_call)
    thread.start()
    time.sleep(0.5)  # the call is running in the handler process
    pool.stop(spec.directory, time.monotonic() + 10)
    thread.join(30)
    assert answers and b'"BODY": "SLEEP 1.5"' in answers[0][0]


LOGGING_CODE = """
import logging

logging.getLogger("inference").info("imported")  # outside any request

def input_handler(data, context):
    logging.getLogger("inference").info("in a handler")
    return data.read()
"""


def test_json_log_lines_of_handler_processes_have_the_services_keys(tmp_path):
    spec = replace(spec_for(tmp_path, LOGGING_CODE, processes=1), log_format="json")
    lifeline, keep = os.pipe()
    proc = subprocess.Popen(
        pool.command(spec, lifeline),
        env=pool.environment(os.environ),
        pass_fds=(lifeline,),
        stderr=subprocess.PIPE,
    )
    os.close(lifeline)
    try:
        pool.wait_ready(spec.directory, time.monotonic() + 60, lambda: proc.poll() is None)
        call(spec, b"x", context(request_id="rid-logs"))
    finally:
        os.close(keep)  # the pool ends, and its stderr with it
        _, err = proc.communicate(timeout=15)
        pool.stop(spec.directory, time.monotonic() + 5)
    lines = [json.loads(line) for line in err.decode().splitlines()]
    ours = {line["message"]: line for line in lines if line["logger"] == "inference"}
    outside, inside = ours["imported"], ours["in a handler"]
    assert inside["request_id"] == "rid-logs"

    def service_line(request_id: str | None) -> dict:
        record = logging.LogRecord("inference", logging.INFO, __file__, 1, "m", (), None)
        token = log_setup.REQUEST_ID.set(request_id)
        try:
            log_setup.RequestIdFilter().filter(record)
        finally:
            log_setup.REQUEST_ID.reset(token)
        return json.loads(log_setup.JsonFormatter().format(record))

    assert outside.keys() == service_line(None).keys()
    assert inside.keys() == service_line("rid-logs").keys()
