"""The model servers' REST API on kept-alive connections (http11.py), answering
`requests.Response`.

One connection pool per model server instance (at most POOL_SIZE idle connections kept; more
concurrent requests get connections that close after use), used from the caller's event loop
(`arequest`); a caller on a thread GETs on a connection of its own (`get`).
Each call has the request's deadline: 503 ModelServerUnavailable when the model server is down,
504 ModelServerTimeout past the deadline, ModelServerError with TF Serving's status and text for
its error answers where the caller asks for them.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import requests
from requests.structures import CaseInsensitiveDict

from sagemaker_serving.tfs_client import health
from sagemaker_serving.tfs_client.errors import (
    DEADLINE_PASSED,
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)
from sagemaker_serving.tfs_client.http11 import (
    ConnectionPool,
    PastDeadline,
    Refused,
    Unreachable,
)
from sagemaker_serving.tfs_client.responses import as_response

POOL_SIZE = 32  # idle keep-alive connections kept per instance (and event loop)
HOST = "127.0.0.1"
JSON_HEADERS = {"Content-Type": "application/json"}


class RestClient:
    """Keep-alive HTTP/1.1 to the model servers' REST ports."""

    def __init__(self, ports: Sequence[int], pool_size: int = POOL_SIZE) -> None:
        self.ports = list(ports)
        self.pool_size = pool_size
        self._pools: dict[int, ConnectionPool] = {}

    def uri(self, index: int, path: str) -> str:
        """The URI of `path` on instance `index`."""
        return f"http://{HOST}:{self.ports[index]}{path}"

    async def arequest(
        self, method: str, uri: str, body: bytes | str | None, deadline: float
    ) -> requests.Response:
        """Send to a model server URI (its port picks the pool) from the running event loop
        and read the whole answer; 503/504 ModelServerErrors when the model server is down or
        too slow. An instance that refuses the connection (down, restarting: nothing was sent)
        passes the request on to the next one."""
        if isinstance(body, str):
            body = body.encode()
        if deadline <= time.monotonic():
            raise ModelServerTimeout(DEADLINE_PASSED)
        split = urlsplit(uri)
        path = f"{split.path}?{split.query}" if split.query else split.path
        headers = JSON_HEADERS if body is not None else {}
        ports = self._failover_order(split.port or 80)
        try:
            for tried, port in enumerate(ports, 1):
                pool = self._pools.get(port) or self._pools.setdefault(
                    port, ConnectionPool(HOST, port, self.pool_size)
                )
                try:
                    answer = await pool.exchange(method, path, body, headers, deadline)
                    break
                except Refused:
                    if tried == len(ports):
                        raise
        except PastDeadline as exc:
            raise ModelServerTimeout() from exc
        except Unreachable as exc:
            raise ModelServerUnavailable(exc) from exc
        sent = requests.PreparedRequest()  # set field by field: no `prepare()`
        sent.method, sent.url, sent.body = method, uri, body
        sent.headers = CaseInsensitiveDict(headers)
        return as_response(answer.status, answer.reason, answer.headers, answer.body, uri, sent)

    def _failover_order(self, port: int) -> list[int]:
        """`port` first, then the other instances' in turn (a port of no instance alone)."""
        if port not in self.ports:
            return [port]
        i = self.ports.index(port)
        return self.ports[i:] + self.ports[:i]

    def get(self, index: int, path: str, deadline: float) -> tuple[int, bytes]:
        """(status, body) of GET `path` on instance `index`, for a caller on a thread (the
        built-in formats' metadata, the multi-model status polls: seldom, so on a connection
        of its own); 503/504 as `arequest`."""
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ModelServerTimeout(DEADLINE_PASSED)
        conn = http.client.HTTPConnection(HOST, self.ports[index], timeout=timeout)
        try:
            return health.fetch(conn, path, deadline)
        except TimeoutError as exc:
            raise ModelServerTimeout() from exc
        except (OSError, http.client.HTTPException) as exc:
            raise ModelServerUnavailable(exc) from exc

    def version_states(self, index: int, model: str, deadline: float) -> dict[int, str]:
        """{version: state} of `model` on instance `index`; {} when it is unknown there."""
        status = self._model_status(index, model, deadline)
        return {} if status is None else health.version_states(status)

    def version_error_codes(self, index: int, model: str, deadline: float) -> set[str]:
        """The status codes of `model`'s failed versions on instance `index` (a failed load's
        reason, carried by the model server); empty when it is unknown there."""
        status = self._model_status(index, model, deadline)
        return set() if status is None else health.version_error_codes(status)

    def _model_status(self, index: int, model: str, deadline: float) -> bytes | None:
        """The model status answer of `model` on instance `index`; None when it is unknown."""
        status, body = self.get(index, health.model_path(model), deadline)
        if status == 404:
            return None
        if status != 200:
            raise ModelServerError(error_text(body), status)
        return body


def error_text(body: bytes) -> str:
    """TF Serving's error message (`{"error": ...}`), else the answer's text. A message that
    echoes a client's invalid UTF-8 is read with replacement characters (it is still JSON)."""
    text = body.decode("utf-8", "replace")
    try:
        return str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        return text
