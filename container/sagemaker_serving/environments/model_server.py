"""A handler process's own hop to the model server: the input handler's request, POSTed to the
request's `context.rest_uri` on a kept-alive connection of the calling thread, within the
request's deadline. The service's workers make this hop with the service's client; a handler
process makes it itself, so a request crosses to it once (environments/remote.py).

Standard library only, besides tfs_client's error messages: it runs under the user's
interpreter.
"""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from sagemaker_serving.errors import StatusError
from sagemaker_serving.tfs_client.errors import TOO_LATE, UNAVAILABLE

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class ModelServerFailure(StatusError):
    """No answer from the model server: 503 (down) or 504 (too slow)."""


class _Connections(threading.local):
    def __init__(self) -> None:
        self.by_port: dict[int, http.client.HTTPConnection] = {}


class ModelServerHop:
    """POSTs to the model server, one kept-alive connection per thread and port."""

    def __init__(self) -> None:
        self._local = _Connections()

    def post(self, uri: str, body: bytes, deadline: float) -> tuple[dict[str, Any], bytes]:
        """(the answer's status, reason, headers and url, as messages.response_meta writes
        them; its body). ModelServerFailure when there is none."""
        parts = urlsplit(uri)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        port = parts.port or 80
        connections = self._local.by_port
        while True:
            timeout = deadline - time.monotonic()  # again for a retry: the time left
            if timeout <= 0:
                raise ModelServerFailure(TOO_LATE, 504)
            reused = port in connections
            if not reused:
                connections[port] = http.client.HTTPConnection(
                    parts.hostname or "127.0.0.1", port, timeout=timeout
                )
            conn = connections[port]
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                reply = conn.getresponse()
                content = reply.read()
            except OSError as exc:
                connections.pop(port).close()
                if isinstance(exc, TimeoutError):
                    raise ModelServerFailure(TOO_LATE, 504) from None
                if reused and isinstance(exc, _STALE):  # closed while idle: once more, anew
                    continue
                raise ModelServerFailure(UNAVAILABLE, 503) from None
            if reply.will_close:
                connections.pop(port).close()
            meta = {
                "status": reply.status,
                "reason": reply.reason,
                "headers": dict(reply.getheaders()),
                "url": uri,
            }
            return meta, content
