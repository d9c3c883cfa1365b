"""gunicorn's gthread worker, keeping a kept-alive connection on its thread for a moment.

gthread hands each kept-alive connection back to its main thread after every answer: the main
thread polls it, and hands the next request to a pool thread again (a pipe write, two thread
wake-ups and four epoll calls per request). nginx reuses the connection it released last, so
the next request on it usually comes within a millisecond: this worker waits that long on the
same thread, while the pool has a thread to spare, and answers it there.
"""

from __future__ import annotations

import select

from gunicorn.workers.gthread import ThreadWorker

LINGER_SECONDS = 0.002
MAX_IN_A_ROW = 100  # then back to the main thread, which also times out idle connections
WORKER_CLASS = f"{__name__}.LingeringThreadWorker"


class LingeringThreadWorker(ThreadWorker):
    """gthread, answering a connection's next request on the same thread when it comes soon."""

    linger_seconds = LINGER_SECONDS

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.busy = 0  # requests handed to the pool and not finished (main thread's count)

    def enqueue_req(self, conn) -> None:  # type: ignore[no-untyped-def]
        self.busy += 1
        super().enqueue_req(conn)

    def finish_request(self, conn, fs) -> None:  # type: ignore[no-untyped-def]
        self.busy -= 1
        super().finish_request(conn, fs)

    def handle(self, conn):  # type: ignore[no-untyped-def]
        keepalive = super().handle(conn)
        for _ in range(MAX_IN_A_ROW):
            if keepalive is not True or not self.alive or not self._next_comes_soon(conn):
                break
            keepalive = super().handle(conn)
        return keepalive

    def _next_comes_soon(self, conn) -> bool:  # type: ignore[no-untyped-def]
        if conn.parser.unreader.buf.getvalue():
            return True
        if self.busy >= self.cfg.threads:
            return False  # a request may be waiting for this thread
        waiting = select.poll()  # one system call (an epoll selector would make four)
        waiting.register(conn.sock, select.POLLIN)
        return bool(waiting.poll(self.linger_seconds * 1000))
