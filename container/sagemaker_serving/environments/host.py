"""Handler processes for one user environment, run by that environment's own interpreter.

    python -m sagemaker_serving.environments.host --dir POOL_DIR --code-dir CODE
        [--path DIR ...] [--module inference] [--processes N]
        [--lifeline-fd FD] [--log-format text|json] [--daemon]

The master binds POOL_DIR/socket and starts N workers (this module again, with --worker-fd),
which import the user's inference.py and answer the service's calls (protocol.py), each
connection on a thread of its own. The master writes POOL_DIR/status.json: {"ready": true,
"functions": [...]} once every worker imported the code, or {"error": "..."} (and exits 3)
when the import fails. It restarts a worker that dies, saying how it died (a crashed
extension: SIGSEGV), and ends with its workers on SIGTERM, or when the lifeline pipe serve
holds the other end of reads end-of-file (serve is gone). `--daemon` (multi-model loads):
the master detaches from whoever started it.

Standard library only, besides the user's packages and sagemaker_serving's handler API: it
imports nothing the user's environment may have in another version.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from process_utils import die_with_parent, tree
from process_utils.exit_reason import exit_reason
from process_utils.files import replace_text
from process_utils.stopping import PopenProcess, stop_all
from sagemaker_serving.config import log_setup
from sagemaker_serving.environments import protocol
from sagemaker_serving.environments.messages import (
    context_fields,
    make_context,
    make_response,
    response_meta,
)
from sagemaker_serving.environments.model_server import ModelServerHop
from sagemaker_serving.errors import StatusError, brief
from sagemaker_serving.user_code import contract as handler_contract
from sagemaker_serving.user_code import defaults, fork_guard
from sagemaker_serving.user_code.handler_api import HandlerError
from sagemaker_serving.user_code.loading import Handlers, UserCodeError, load_handlers

log = logging.getLogger("sagemaker_serving.handlers")

SOCKET_NAME = "socket"
STATUS_NAME = "status.json"
PID_NAME = "pid"
STOP_GRACE_SECONDS = 3.0
BACKOFF_INITIAL, BACKOFF_MAX, STABLE_SECONDS = 0.5, 10.0, 60.0
MAX_REPORT_CHARS = 3000
DRAIN_SECONDS = 2.5  # a stopped worker's calls in progress get this long (the master: 3 s)
# calls whose request is past its deadline (the service answered 504 and dropped them) that a
# worker holds, still running, before it ends itself to be started again: a handler that never
# returns keeps its thread, and each new call gets a new one
MAX_ABANDONED_CALLS = 8
ABANDONED_EXIT = 75


# ----- the master ---------------------------------------------------------------------------


def write_status(pool_dir: Path, doc: dict[str, Any]) -> None:
    replace_text(pool_dir / STATUS_NAME, json.dumps(doc))


class Master:
    """Binds the socket, keeps N workers running, reports readiness, stops them."""

    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        self.args = args
        self.argv = argv
        self.pool_dir = Path(args.dir)
        self.stopping = False
        self.workers: dict[int, tuple[subprocess.Popen, float]] = {}  # slot -> (proc, started)
        self.backoff: dict[int, float] = {}
        self.due: dict[int, float] = {}  # slot -> when its next worker starts
        self.ready: set[int] = set()
        self.reported = False
        self.failed = False
        self.orphaned = False
        self.functions: list[str] = []

    def run(self) -> int:
        # what the handlers start and leave (a detached child) stays under the master, which
        # stops it with its workers
        tree.become_subreaper()
        sock_path = self.pool_dir / SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(sock_path))
        os.chmod(sock_path, 0o600)
        listener.listen(256)
        ready_r, ready_w = os.pipe()
        self.listen_fd, self.ready_w = listener.fileno(), ready_w
        (self.pool_dir / PID_NAME).write_text(str(os.getpid()))
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        for slot in range(self.args.processes):
            self._spawn(slot)
        watched = [ready_r] + ([self.args.lifeline_fd] if self.args.lifeline_fd is not None else [])
        pending = b""
        while not self.stopping:
            readable, _, _ = select.select(watched, [], [], 0.2)
            if self.args.lifeline_fd in readable and not os.read(self.args.lifeline_fd, 4096):
                log.info("serve is gone: handler processes stop")
                self.orphaned = True
                # at once: serve's watchdog SIGKILLs what ran under serve (this master too)
                # while the workers stop, and nobody else removes our folder
                shutil.rmtree(self.pool_dir, ignore_errors=True)
                break
            if ready_r in readable:
                pending += os.read(ready_r, 65536)
                *lines, pending = pending.split(b"\n")
                if self._worker_lines(lines):
                    self.failed = True
                    break
            self._reap()
            for slot, due in list(self.due.items()):  # from this thread: see _spawn
                if time.monotonic() >= due:
                    del self.due[slot]
                    self._spawn(slot)
        self._stop_workers()
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        if self.orphaned:  # what the workers left in it meanwhile
            shutil.rmtree(self.pool_dir, ignore_errors=True)
        return 3 if self.failed else 0

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _spawn(self, slot: int) -> None:
        command = [sys.executable, "-m", __spec__.name if __spec__ else "host", *self.argv]
        command += ["--worker-fd", str(self.listen_fd), "--ready-fd", str(self.ready_w)]
        fds = [self.listen_fd, self.ready_w]
        if self.args.lifeline_fd is not None:
            fds.append(self.args.lifeline_fd)
        # SIGKILL when the master dies (SIGTERM, user code may catch); the kernel sends it when
        # the thread that forked exits, so the master spawns from its main thread only
        kill_with_master = functools.partial(die_with_parent, signal.SIGKILL)
        proc = subprocess.Popen(command, pass_fds=fds, preexec_fn=kill_with_master)
        self.workers[slot] = (proc, time.monotonic())

    def _worker_lines(self, lines: list[bytes]) -> bool:
        """Apply workers' reports; True when start-up failed (the error is in status.json)."""
        for line in lines:
            kind, _, rest = line.decode(errors="replace").partition(" ")
            doc = json.loads(rest) if rest else {}
            if kind == "ready":
                self.ready.add(int(doc["pid"]))
                self.functions = doc["functions"]
            elif kind == "error":
                log.error("handler process %s: %s", doc.get("pid"), doc.get("message"))
                if not self.reported:
                    write_status(self.pool_dir, {"error": doc.get("message", "start-up failed")})
                    return True
        alive = {proc.pid for proc, _ in self.workers.values()}
        if not self.reported and alive and alive <= self.ready:
            write_status(self.pool_dir, {"ready": True, "functions": self.functions})
            self.reported = True
        return False

    def _reap(self) -> None:
        now = time.monotonic()
        for slot, (proc, started) in list(self.workers.items()):
            if proc.poll() is None:
                continue
            self.ready.discard(proc.pid)
            if self.stopping:
                continue
            if not self.reported:
                message = f"a handler process {exit_reason(proc.returncode)} during start-up"
                write_status(self.pool_dir, {"error": message})
                self.stopping = self.failed = True
                return
            wait = self.backoff.get(slot, BACKOFF_INITIAL)
            if now - started > STABLE_SECONDS:
                wait = BACKOFF_INITIAL
            log.error(
                "handler process %d %s; starting another in %.1fs",
                proc.pid,
                exit_reason(proc.returncode),
                wait,
            )
            self.backoff[slot] = min(BACKOFF_MAX, wait * 2)
            del self.workers[slot]
            self.due[slot] = now + wait

    def _stop_workers(self) -> None:
        stop_all([PopenProcess(proc) for proc, _ in self.workers.values()], STOP_GRACE_SECONDS)
        left = tree.kill_all(tree.descendants(os.getpid()), time.monotonic() + STOP_GRACE_SECONDS)
        if left:
            log.info("stopped %d process(es) the handlers left running", left)


# ----- a worker ------------------------------------------------------------------------------


_local = threading.local()  # the connection of the call this thread runs (for callbacks)


def _callback(fn: str, context: Any, header: dict[str, Any], body: bytes) -> tuple[bytes, Any]:
    conn = getattr(_local, "conn", None)
    if conn is None:
        raise RuntimeError(f"{fn} can only be called from a handler while it handles a request")
    call_id = getattr(_local, "call_id", None)
    doc = {"op": "callback", "id": call_id, "fn": fn, "context": context_fields(context), **header}
    protocol.write_frame(conn, doc, body)
    frame = protocol.read_frame(conn)
    if frame is None:
        raise ConnectionError("the service closed the connection")
    reply, data = frame
    protocol.check_id(reply, call_id)
    if not reply.get("ok"):
        raise HandlerError(str(reply.get("message")), int(reply.get("status", 500)))
    return data, reply.get("content_type")


class RemoteDefaults:
    """default_input_handler and default_output_handler in a handler process: the service's
    built-in formats convert (user_code/defaults.py)."""

    def request(self, data: Any, context: Any) -> bytes:
        body = data.read() if hasattr(data, "read") else handler_contract.as_bytes(data)
        result, _ = _callback("default_input_handler", context, {}, body or b"")
        return result

    def answer(self, response: Any, context: Any) -> tuple[bytes, str]:
        meta, content = response_meta(response)
        body, content_type = _callback(
            "default_output_handler", context, {"response": meta}, content
        )
        return body, str(content_type)


class Worker:
    """Imports the user's code, then answers calls on the inherited listening socket."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.handlers = Handlers()
        self._active = threading.Condition()
        self._deadlines: dict[int, float] = {}  # calls in progress: thread -> their deadline
        self.model_server = ModelServerHop()
        # a child the user's code forks closes the listener and every connection: it can never
        # answer a call
        bound = str(Path(args.dir) / SOCKET_NAME)
        fork_guard.close_in_children(lambda: fork_guard.sockets_bound_to(bound))

    def run(self) -> int:
        ready = os.fdopen(self.args.ready_fd, "w", buffering=1)
        defaults.install(RemoteDefaults())
        try:
            self.handlers = load_handlers(
                Path(self.args.code_dir), self.args.module, self.args.path
            )
        except UserCodeError as exc:
            message = str(exc)[:MAX_REPORT_CHARS]  # one write of a line under PIPE_BUF
            ready.write("error " + json.dumps({"pid": os.getpid(), "message": message}) + "\n")
            return 3
        listener = socket.socket(fileno=self.args.worker_fd)
        ready.write(
            "ready " + json.dumps({"pid": os.getpid(), "functions": self.handlers.names}) + "\n"
        )
        ready.close()
        # SIGTERM: no more connections (accept fails on the closed listener), then the drain
        signal.signal(signal.SIGTERM, lambda signum, frame: listener.close())
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                self._end_if_stuck()
                threading.Thread(target=self.serve, args=(conn,), daemon=True).start()
        self._finish_calls(time.monotonic() + DRAIN_SECONDS)
        os._exit(0)  # idle connections' threads wait on a socket: no need to join them

    def serve(self, conn: socket.socket) -> None:
        _local.conn = conn
        try:
            with conn:
                while (frame := protocol.read_frame(conn)) is not None:
                    header, body = frame
                    if header.get("op") == "hello":
                        names = self.handlers.names
                        protocol.write_frame(
                            conn, {"op": "ready", "functions": names, "pid": os.getpid()}
                        )
                    elif header.get("op") == "run":
                        deadline = float((header.get("context") or {}).get("deadline") or "inf")
                        with self._active:
                            self._deadlines[threading.get_ident()] = deadline
                        try:
                            self.answer(conn, header, body)
                        finally:
                            with self._active:
                                self._deadlines.pop(threading.get_ident(), None)
                                self._active.notify_all()
                    else:
                        return
        except (OSError, protocol.ProtocolError):
            return

    def answer(self, conn: socket.socket, header: dict[str, Any], body: bytes) -> None:
        """A run call's answer: one result frame, or a streamed answer's frames."""
        reply, answer = self.run_request(header, body)
        if handler_contract.is_chunks(answer):
            self.stream(conn, header, reply, answer)
        else:
            protocol.write_frame(conn, {**reply, "id": header.get("id")}, answer)

    def stream(
        self, conn: socket.socket, header: dict[str, Any], reply: dict[str, Any], chunks: Any
    ) -> None:
        """A streamed answer: the reply, then a frame per chunk as the handler's iterator
        yields it, then `end` (with `status` and `message` when the iterator failed). The
        iterator is closed however it ends (the service closes the connection when its client
        went away)."""
        call_id = header.get("id")
        request_id = log_setup.REQUEST_ID.set(str((header.get("context") or {}).get("request_id")))
        _local.call_id = call_id  # a call back from the iterator names it (and is refused)
        end: dict[str, Any] = {"op": "end", "id": call_id}
        with self._active:  # a stream may outlast its request's deadline: it is not stuck
            self._deadlines[threading.get_ident()] = float("inf")
        try:
            protocol.write_frame(conn, {**reply, "id": call_id, "stream": True})
            while True:
                try:
                    data = handler_contract.chunk_bytes(next(chunks))
                except StopIteration:
                    break
                except BaseException as exc:  # the handler's failure: the stream ends saying so
                    end.update(_failure(exc))
                    break
                protocol.write_frame(conn, {"op": "chunk", "id": call_id}, data)
            protocol.write_frame(conn, end)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                fork_guard.call(close)
            log_setup.REQUEST_ID.reset(request_id)
            _local.call_id = None

    def _end_if_stuck(self) -> None:
        """End this process (the master starts another) once MAX_ABANDONED_CALLS calls run on
        past their requests' deadlines: their threads would otherwise pile up for good."""
        now = time.monotonic()
        with self._active:
            abandoned = sum(1 for deadline in self._deadlines.values() if deadline < now)
        if abandoned >= MAX_ABANDONED_CALLS:
            log.error(
                "%d handler calls never returned after their requests' deadlines: this handler "
                "process ends, and another one starts",
                abandoned,
            )
            os._exit(ABANDONED_EXIT)

    def _finish_calls(self, deadline: float) -> None:
        """Let the calls in progress answer (an unload or a stop), until `deadline`."""
        with self._active:
            while self._deadlines and time.monotonic() < deadline:
                self._active.wait(max(0.0, deadline - time.monotonic()))

    def run_request(self, header: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
        """The request's whole chain here: `handler`, or input_handler, the model server and
        output_handler (without one, the model server's answer goes back for the built-in
        formats). The reply says how long each step took (the service's metrics)."""
        context = make_context(header["context"])
        request_id = log_setup.REQUEST_ID.set(context.request_id)  # on its log lines
        _local.call_id = header.get("id")
        handlers, took = self.handlers, dict[str, float]()
        try:
            if handlers.handler is not None:
                with _timed(took, "handler"):
                    value = fork_guard.call(handlers.handler, io.BytesIO(body), context)
                answer, content_type = handler_contract.answer(value, handlers.handler, "handler")
                return _result(took, content_type=content_type), answer
            if handlers.input_handler is None:
                raise RuntimeError("inference.py has no input_handler")
            with _timed(took, "input_handler"):
                value = fork_guard.call(handlers.input_handler, io.BytesIO(body), context)
            request = handler_contract.request_body(value, handlers.input_handler)
            with _timed(took, "model_server"):
                meta, content = self.model_server.post(context.rest_uri, request, context.deadline)
            if handlers.output_handler is None:
                return _result(took, response=meta), content
            with _timed(took, "output_handler"):
                response = make_response(meta, content)
                value = fork_guard.call(handlers.output_handler, response, context)
            answer, content_type = handler_contract.answer(value, handlers.output_handler)
            return _result(took, content_type=content_type, model_status=meta["status"]), answer
        except BaseException as exc:  # SystemExit and the like too: the thread serves on
            return {"op": "result", "ok": False, **_failure(exc)}, b""
        finally:
            log_setup.REQUEST_ID.reset(request_id)
            _local.call_id = None


@contextlib.contextmanager
def _timed(took: dict[str, float], step: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        took[step] = time.monotonic() - started


def _result(took: dict[str, float], **fields: Any) -> dict[str, Any]:
    return {"op": "result", "ok": True, "took": took, **fields}


def _failure(exc: BaseException) -> dict[str, Any]:
    """A handler's failure as the service is told it (its message kept brief): a HandlerError's
    or the model server's status, else 500 and the failure logged."""
    if isinstance(exc, StatusError) and not isinstance(exc, handler_contract.HandlerResultError):
        return {"status": exc.http_status, "message": brief(exc.message)}
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    log.error("a handler failed: %s", message, exc_info=exc)  # its traceback follows
    return {"status": 500, "message": brief(str(message))}


# ----- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sagemaker_serving.environments.host")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--code-dir", required=True)
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--module", default="inference")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--lifeline-fd", type=int)
    parser.add_argument("--log-format", default="text", choices=log_setup.LOG_FORMATS)
    parser.add_argument("--daemon", action="store_true")
    parser.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    log_setup.configure("INFO", args.log_format)
    if args.worker_fd is not None:
        return Worker(args).run()
    if args.daemon and os.fork() > 0:  # the starter reaps this parent; init adopts the master
        os._exit(0)
    if args.daemon:
        os.setsid()
    return Master(args, [a for a in argv if a != "--daemon"]).run()  # the workers' too


if __name__ == "__main__":
    sys.exit(main())
