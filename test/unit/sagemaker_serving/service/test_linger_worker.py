"""LingeringThreadWorker: a kept-alive connection's next request answered on the same thread
when it comes soon and the pool has a thread to spare; otherwise gthread as it is. Real
gunicorn worker code over a socketpair."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.workers.gthread import TConn

from sagemaker_serving.service import linger_worker
from sagemaker_serving.service.linger_worker import LingeringThreadWorker

REQUEST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"


def echo(environ, start_response):  # type: ignore[no-untyped-def]
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture
def worker() -> LingeringThreadWorker:
    cfg = Config()
    cfg.set("threads", 2)
    made = LingeringThreadWorker(0, os.getppid(), [], None, 30, cfg, Logger(cfg))
    made.wsgi = echo
    made.linger_seconds = 5.0  # generous: what arrives during the wait is what counts here
    return made


@pytest.fixture
def pair(worker: LingeringThreadWorker) -> Iterator[tuple[TConn, socket.socket]]:
    ours, theirs = socket.socketpair()
    theirs.settimeout(10)
    yield TConn(worker.cfg, ours, "", ("127.0.0.1", 8080)), theirs
    ours.close()
    theirs.close()


def answers(client: socket.socket, count: int) -> bytes:
    """Read until `count` whole answers (each ends with the echoed body) have come."""
    data = b""
    while data.count(b"\r\n\r\nhi") < count:
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_pipelined_requests_are_all_answered_on_the_thread(worker, pair):
    conn, client = pair
    client.sendall(REQUEST * 3)
    worker.linger_seconds = 0.0
    assert worker.handle(conn) is True
    assert answers(client, 3).count(b"HTTP/1.1 200 OK") == 3


def test_a_request_sent_after_the_answer_is_answered_on_the_same_thread(worker, pair):
    conn, client = pair
    seen: list[bytes] = []

    def client_side() -> None:
        client.sendall(REQUEST)
        seen.append(answers(client, 1))
        client.sendall(REQUEST)  # while the worker waits on this connection
        seen.append(answers(client, 1))
        client.shutdown(socket.SHUT_WR)  # and no third: the worker's next wait ends

    sender = threading.Thread(target=client_side)
    sender.start()
    handled: list[int] = []
    worker.handle = _recording(worker.handle, handled)  # type: ignore[method-assign]
    assert worker.handle(conn) is False  # ended by the close, after both answers
    sender.join(10)
    assert [answer.count(b"HTTP/1.1 200 OK") for answer in seen] == [1, 1]
    assert handled == [1]  # one call of handle answered both


def _recording(handle, calls: list[int]):  # type: ignore[no-untyped-def]
    def wrapped(conn):  # type: ignore[no-untyped-def]
        calls.append(1)
        return handle(conn)

    return wrapped


def test_no_waiting_when_every_thread_is_taken(worker, pair):
    conn, client = pair
    client.sendall(REQUEST)
    worker.busy = worker.cfg.threads
    assert worker.handle(conn) is True  # back to gthread's main thread at once (not 5 s)
    assert answers(client, 1).count(b"HTTP/1.1 200 OK") == 1


def test_no_waiting_in_a_stopping_worker(worker, pair):
    conn, client = pair
    client.sendall(REQUEST)
    worker.alive = False
    worker.handle(conn)
    assert answers(client, 1).count(b"200 OK") == 1


def test_a_connection_closed_while_waiting_ends_there(worker, pair):
    conn, client = pair
    client.sendall(REQUEST)
    threading.Thread(target=lambda: (answers(client, 1), client.shutdown(socket.SHUT_WR))).start()
    assert worker.handle(conn) is False  # closed, as gthread closes it


def test_at_most_max_in_a_row_then_back_to_the_main_thread(worker, pair):
    conn, client = pair
    total = linger_worker.MAX_IN_A_ROW + 5
    reader_done: list[bytes] = []
    reader = threading.Thread(target=lambda: reader_done.append(answers(client, total - 4)))
    reader.start()
    client.sendall(REQUEST * total)
    worker.linger_seconds = 0.0
    assert worker.handle(conn) is True
    reader.join(10)
    assert reader_done[0].count(b"HTTP/1.1 200 OK") == linger_worker.MAX_IN_A_ROW + 1
    assert conn.parser.unreader.buf.getvalue()  # the rest waits for gthread to hand it on


def test_busy_counts_requests_handed_to_the_pool_until_they_finish(worker, pair):
    conn, client = pair
    futures: list[_Future] = []
    worker.tpool = type("Pool", (), {"submit": lambda self, fn, c: _Future(futures)})()
    worker.method_queue = type("Queue", (), {"defer": lambda self, fn, *a: fn(*a)})()
    worker.nr_conns = 1
    worker.enqueue_req(conn)
    assert worker.busy == 1
    futures[0].finish(False)  # the request ended the connection: gthread closes it
    assert worker.busy == 0
    assert client.recv(1) == b""


class _Future:
    def __init__(self, made: list[_Future]) -> None:
        self.callbacks: list = []
        self.value: object = None
        made.append(self)

    def add_done_callback(self, callback) -> None:  # type: ignore[no-untyped-def]
        self.callbacks.append(callback)

    def cancelled(self) -> bool:
        return False

    def result(self) -> object:
        return self.value

    def finish(self, value: object) -> None:
        self.value = value
        for callback in self.callbacks:
            callback(self)
