"""A handler process's own hop to the model server: the input handler's request, POSTed to the
request's `context.rest_uri` on a kept-alive connection of the calling thread, within the
request's deadline. The service's workers make this hop with the service's client; a handler
process makes it itself, so a request crosses to it once (environments/remote.py).

Standard library only: it runs under the user's interpreter.
"""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any
from urllib.parse import urlsplit

UNAVAILABLE = "The model server is unavailable"
TIMED_OUT = "The model server did not answer within the request's time limit"
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class ModelServerFailure(Exception):
    """No answer from the model server: `status` (503 down, 504 too slow) and `message`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ModelServerHop:
    """POSTs to the model server, one kept-alive connection per thread and port."""

    def __init__(self) -> None:
        self._local = threading.local()

    def post(self, uri: str, body: bytes, deadline: float) -> tuple[dict[str, Any], bytes]:
        """(the answer's status, reason, headers and url, as messages.response_meta writes
        them; its body). ModelServerFailure when there is none."""
        parts = urlsplit(uri)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        port = parts.port or 80
        for attempt in (1, 2):
            conn, reused = self._connection(parts.hostname or "127.0.0.1", port, deadline)
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                reply = conn.getresponse()
                content = reply.read()
            except TimeoutError:
                self._drop(port)
                raise ModelServerFailure(TIMED_OUT, 504) from None
            except _STALE:
                self._drop(port)
                if reused and attempt == 1:  # closed while idle: once more, on a new one
                    continue
                raise ModelServerFailure(UNAVAILABLE, 503) from None
            except OSError:
                self._drop(port)
                raise ModelServerFailure(UNAVAILABLE, 503) from None
            if reply.will_close:
                self._drop(port)
            meta = {
                "status": reply.status,
                "reason": reply.reason,
                "headers": dict(reply.getheaders()),
                "url": uri,
            }
            return meta, content
        raise ModelServerFailure(UNAVAILABLE, 503)  # not reached: the loop returns or raises

    def _connection(
        self, host: str, port: int, deadline: float
    ) -> tuple[http.client.HTTPConnection, bool]:
        connections = self._connections()
        timeout = max(0.001, deadline - time.monotonic())
        conn = connections.get(port)
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        conn = connections[port] = http.client.HTTPConnection(host, port, timeout=timeout)
        return conn, False

    def _drop(self, port: int) -> None:
        conn = self._connections().pop(port, None)
        if conn is not None:
            conn.close()

    def _connections(self) -> dict[int, http.client.HTTPConnection]:
        if not hasattr(self._local, "connections"):
            self._local.connections = {}
        return self._local.connections
