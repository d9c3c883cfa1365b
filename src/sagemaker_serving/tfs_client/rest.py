"""The model servers' REST API over urllib3's connection pools, answering `requests.Response`.

One keep-alive pool per model server instance (thread-safe, at most POOL_SIZE idle
connections kept; more concurrent requests, e.g. gevent workers' greenlets, get connections
that close after use, which urllib3 would log as a warning each time). Each call
has the request's deadline: 503 ModelServerUnavailable when the model server is down, 504
ModelServerTimeout past the deadline, ModelServerError with TF Serving's status and text for
its error answers where the caller asks for them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from sagemaker_serving.tfs_client import health
from sagemaker_serving.tfs_client.errors import (
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)

POOL_SIZE = 32  # idle keep-alive connections kept per instance (and process)
HOST = "127.0.0.1"


class _NoPoolFullWarnings(logging.Filter):
    """Drops urllib3's 'Connection pool is full, discarding connection' lines: closing a
    connection beyond POOL_SIZE is how the pool stays bounded here, not a fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Connection pool is full")


logging.getLogger("urllib3.connectionpool").addFilter(_NoPoolFullWarnings())

_BEFORE_DEADLINE = "The request deadline passed before the model server answered"
_PAST_DEADLINE = "The model server did not answer before the request deadline"


class RestClient:
    """Keep-alive HTTP/1.1 to the model servers' REST ports, and their metadata (cached)."""

    def __init__(self, ports: Sequence[int], pool_size: int = POOL_SIZE) -> None:
        self.ports = list(ports)
        self.pool_size = pool_size
        self._pools: dict[int, urllib3.HTTPConnectionPool] = {}
        self._lock = threading.Lock()
        self._adapter = HTTPAdapter()  # builds the requests.Response; it holds no pools here
        self._metadata: dict[tuple[str, str | None], dict] = {}
        for port in self.ports:
            self._pool(port)

    def uri(self, index: int, path: str) -> str:
        """The URI of `path` on instance `index`."""
        return f"http://{HOST}:{self.ports[index]}{path}"

    def request(
        self, method: str, uri: str, body: bytes | str | None, deadline: float
    ) -> requests.Response:
        """Send to a model server URI (its port picks the pool) and read the whole answer;
        503/504 ModelServerErrors when the model server is down or too slow."""
        if isinstance(body, str):
            body = body.encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        # what the answer's `request` says; urllib3 adds Host and Content-Length itself
        prepared = requests.Request(method, uri, headers=headers, data=body).prepare()
        pool = self._pool(urlsplit(uri).port or 80)
        for attempt in range(2):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ModelServerTimeout(_BEFORE_DEADLINE)
            try:
                raw = pool.urlopen(
                    method,
                    prepared.path_url,
                    body=body,
                    headers=headers,
                    retries=False,
                    redirect=False,
                    timeout=urllib3.Timeout(connect=timeout, read=timeout),
                    preload_content=False,
                    decode_content=False,
                )
            except ProtocolError as exc:
                if attempt == 0:
                    continue  # e.g. a kept-alive connection the server had just closed
                raise _unavailable(exc) from exc
            except (NewConnectionError, OSError) as exc:  # refused, no route ...
                raise _unavailable(exc) from exc
            except Urllib3Timeout as exc:
                raise ModelServerTimeout(_PAST_DEADLINE) from exc
            except HTTPError as exc:
                raise _unavailable(exc) from exc
            return _read(self._adapter.build_response(prepared, raw))
        raise AssertionError("unreachable")

    def version_states(self, index: int, model: str, deadline: float) -> dict[int, str]:
        """{version: state} of `model` on instance `index`; {} when it is unknown there."""
        reply = self.request("GET", self.uri(index, health.model_path(model)), None, deadline)
        if reply.status_code == 404:
            return {}
        if reply.status_code != 200:
            raise ModelServerError(error_text(reply), reply.status_code)
        return health.version_states(reply.content)

    def metadata(self, index: int, model: str, version: str | None, deadline: float) -> dict:
        """The REST metadata of `model` (of `version` if given), from instance `index` on first
        use; cached per (model, version) until `forget` or `clear`."""
        key = (model, version)
        cached = self._metadata.get(key)
        if cached is not None:
            return cached
        versioned = f"/versions/{version}" if version else ""
        path = f"{health.model_path(model)}{versioned}/metadata"
        reply = self.request("GET", self.uri(index, path), None, deadline)
        if reply.status_code != 200:
            raise ModelServerError(error_text(reply), reply.status_code)
        doc = json.loads(reply.content)
        with self._lock:
            self._metadata[key] = doc
        return doc

    def forget(self, model: str) -> None:
        """Drop the cached metadata of every version of `model` (it was loaded or unloaded)."""
        with self._lock:
            for key in [key for key in self._metadata if key[0] == model]:
                del self._metadata[key]

    def clear(self) -> None:
        """Drop all cached metadata (the model servers' models changed)."""
        with self._lock:
            self._metadata.clear()

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def _pool(self, port: int) -> urllib3.HTTPConnectionPool:
        pool = self._pools.get(port)
        if pool is None:
            with self._lock:
                pool = self._pools.get(port)
                if pool is None:
                    pool = self._pools[port] = urllib3.HTTPConnectionPool(
                        HOST, port, maxsize=self.pool_size, block=False, retries=False
                    )
        return pool


def _read(response: requests.Response) -> requests.Response:
    """Read the whole body (in linear time) and give the connection back to its pool."""
    try:
        response.content  # noqa: B018 - reads and keeps it
    except requests.exceptions.ConnectionError as exc:
        if any(isinstance(arg, ReadTimeoutError) for arg in exc.args):
            raise ModelServerTimeout(_PAST_DEADLINE) from exc
        raise _unavailable(exc) from exc
    except requests.exceptions.RequestException as exc:  # cut short, undecodable
        raise _unavailable(exc) from exc
    finally:
        response.close()
    return response


def _unavailable(exc: Exception) -> ModelServerUnavailable:
    return ModelServerUnavailable(f"The model server is unavailable: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """The innermost cause urllib3 and requests wrap (e.g. `[Errno 111] Connection refused`)."""
    for _ in range(8):
        wrapped = [arg for arg in exc.args if isinstance(arg, BaseException)]
        inner = wrapped[-1] if wrapped else exc.__cause__
        if inner is None:
            break
        exc = inner
    return str(exc)


def error_text(reply: requests.Response) -> str:
    """TF Serving's error message (`{"error": ...}`), else the answer's text."""
    try:
        return str(json.loads(reply.content)["error"])
    except (ValueError, KeyError, TypeError):
        return reply.text
