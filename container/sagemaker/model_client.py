"""Keep-alive HTTP to the model servers (round robin), answering with `requests.Response`."""

from __future__ import annotations

import datetime
import http.client
import itertools
import json
import threading
import time
from collections.abc import Sequence

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from .handler_context import HandlerError

_RETRYABLE = (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine)


class ModelServerUnavailable(HandlerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 503)


class ModelServerTimeout(HandlerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 504)


class ModelServerClient:
    """One keep-alive connection per (thread, instance); requests go round robin."""

    def __init__(self, rest_ports: Sequence[int], grpc_ports: Sequence[int]) -> None:
        self.rest_ports = list(rest_ports)
        self.grpc_ports = list(grpc_ports)
        self._next = itertools.count()
        self._local = threading.local()
        self._channels: dict[int, object] = {}
        self._channels_lock = threading.Lock()
        self._metadata: dict[str, dict] = {}

    def pick(self) -> int:
        """An instance index, round robin."""
        return next(self._next) % len(self.rest_ports)

    def rest_uri(self, index: int, path: str) -> str:
        return f"http://127.0.0.1:{self.rest_ports[index]}{path}"

    def channel(self, index: int):
        """A shared gRPC channel to instance `index` (created on first use, in this process)."""
        port = self.grpc_ports[index]
        with self._channels_lock:
            if port not in self._channels:
                import grpc

                self._channels[port] = grpc.insecure_channel(
                    f"127.0.0.1:{port}",
                    options=[
                        ("grpc.max_send_message_length", 2**31 - 1),
                        ("grpc.max_receive_message_length", 2**31 - 1),
                    ],
                )
            return self._channels[port]

    def _connection(self, port: int, timeout: float) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("pool", {})
        conn = pool.get(port)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            pool[port] = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self, port: int) -> None:
        conn = self._local.__dict__.get("pool", {}).pop(port, None)
        if conn is not None:
            conn.close()

    def request(
        self, method: str, uri: str, body: bytes | str | None, deadline: float
    ) -> requests.Response:
        """Send to a model server URI; 503/504 HandlerErrors when it is down or too slow."""
        parsed = requests.utils.urlparse(uri)
        port = parsed.port or 80
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        if isinstance(body, str):
            body = body.encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        started = time.monotonic()
        for attempt in range(2):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ModelServerTimeout(
                    "The request deadline passed before the model server answered"
                )
            conn = self._connection(port, timeout)
            try:
                conn.request(method, path, body, headers)
                reply = conn.getresponse()
                content = reply.read()
            except TimeoutError as exc:
                self._drop(port)
                raise ModelServerTimeout(
                    "The model server did not answer before the request deadline"
                ) from exc
            except (*_RETRYABLE, OSError) as exc:
                self._drop(port)
                if attempt == 0 and isinstance(exc, _RETRYABLE):
                    continue  # a kept-alive connection the server had closed: once more
                raise ModelServerUnavailable(f"The model server is unavailable: {exc}") from exc
            if reply.will_close:
                self._drop(port)
            return _response(uri, reply, content, time.monotonic() - started)
        raise ModelServerUnavailable("The model server is unavailable")

    def metadata(self, model: str, deadline: float) -> dict:
        """The model's REST metadata (cached per process)."""
        if model not in self._metadata:
            index = self.pick()
            reply = self.request(
                "GET", self.rest_uri(index, f"/v1/models/{model}/metadata"), None, deadline
            )
            if reply.status_code != 200:
                raise HandlerError(_error_text(reply), reply.status_code)
            self._metadata[model] = json.loads(reply.content)
        return self._metadata[model]


def _response(
    uri: str, reply: http.client.HTTPResponse, content: bytes, elapsed: float
) -> requests.Response:
    response = requests.Response()
    response.status_code = reply.status
    response.reason = reply.reason
    response.headers = CaseInsensitiveDict(reply.getheaders())
    response._content = content
    response.url = uri
    response.encoding = get_encoding_from_headers(response.headers) or "utf-8"
    response.elapsed = datetime.timedelta(seconds=elapsed)
    return response


def _error_text(reply: requests.Response) -> str:
    try:
        return str(json.loads(reply.content)["error"])
    except (ValueError, KeyError, TypeError):
        return reply.text
