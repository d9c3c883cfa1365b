"""Keep-alive HTTP to the model servers (round robin), answering with `requests.Response`."""

from __future__ import annotations

import datetime
import itertools
import json
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from sagemaker_serving.tfs_client.errors import (
    ModelServerError,
    ModelServerTimeout,
    ModelServerUnavailable,
)
from sagemaker_serving.tfs_client.wire import (
    PREDICT_METHOD,
    RELOAD_CONFIG_METHOD,
    ReloadConfigRequest,
    ReloadConfigResponse,
)


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
        self._predict_calls: dict[int, Any] = {}

    def pick(self) -> int:
        """An instance index, round robin."""
        return next(self._next) % len(self.rest_ports)

    def rest_uri(self, index: int, path: str) -> str:
        return f"http://127.0.0.1:{self.rest_ports[index]}{path}"

    def channel(self, index: int) -> Any:
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

    def predict(self, index: int, request: bytes, deadline: float) -> bytes:
        """gRPC Predict on instance `index` with a serialized PredictRequest; the serialized
        PredictResponse. Failures raise ModelServerError with TF Serving's REST status and text."""
        import grpc

        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ModelServerTimeout("The request deadline passed before the model server answered")
        call = self._predict_calls.get(index)
        if call is None:
            call = self._predict_calls[index] = self.channel(index).unary_unary(PREDICT_METHOD)
        try:
            return call(request, timeout=timeout, wait_for_ready=False)
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    def reload_config(self, index: int, config: bytes, deadline: float) -> str | None:
        """HandleReloadConfigRequest with a serialized ModelServerConfig on instance `index`;
        the model server's error message, or None when it applied the config."""
        import grpc

        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ModelServerTimeout("The deadline passed before the model server was asked")
        call = self.channel(index).unary_unary(RELOAD_CONFIG_METHOD)
        request = ReloadConfigRequest(config=config).SerializeToString()
        try:
            reply = ReloadConfigResponse.FromString(call(request, timeout=timeout))
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None
        return reply.status.error_message or None if reply.status.error_code else None

    def version_states(self, index: int, model: str, deadline: float) -> dict[int, str]:
        """{version: state} of `model` on instance `index` (REST model status); {} if unknown."""
        reply = self.request("GET", self.rest_uri(index, f"/v1/models/{model}"), None, deadline)
        if reply.status_code == 404:
            return {}
        if reply.status_code != 200:
            raise ModelServerError(_error_text(reply), reply.status_code)
        return {
            int(item["version"]): item["state"]
            for item in json.loads(reply.content).get("model_version_status", [])
        }

    def _connection(self, port: int) -> _Connection:
        pool = self._local.__dict__.setdefault("pool", {})
        conn = pool.get(port)
        if conn is None:
            conn = pool[port] = _Connection(port)
        return conn

    def _drop(self, port: int) -> None:
        conn = self._local.__dict__.get("pool", {}).pop(port, None)
        if conn is not None:
            conn.close()

    def request(
        self, method: str, uri: str, body: bytes | str | None, deadline: float
    ) -> requests.Response:
        """Send to a model server URI; 503/504 ModelServerErrors when it is down or too slow."""
        port, path = _split_uri(uri)
        if isinstance(body, str):
            body = body.encode()
        started = time.monotonic()
        for attempt in range(2):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ModelServerTimeout(
                    "The request deadline passed before the model server answered"
                )
            conn = self._connection(port)
            reused = conn.sock is not None
            try:
                status, reason, headers, content, keep = conn.exchange(method, path, body, timeout)
            except TimeoutError as exc:
                self._drop(port)
                raise ModelServerTimeout(
                    "The model server did not answer before the request deadline"
                ) from exc
            except (OSError, ValueError) as exc:
                self._drop(port)
                if attempt == 0 and reused:
                    continue  # a kept-alive connection the server had closed: once more
                raise ModelServerUnavailable(f"The model server is unavailable: {exc}") from exc
            if not keep:
                self._drop(port)
            return _response(uri, status, reason, headers, content, time.monotonic() - started)
        raise ModelServerUnavailable("The model server is unavailable")

    def metadata(self, model: str, deadline: float) -> dict:
        """The model's REST metadata (cached per process)."""
        if model not in self._metadata:
            index = self.pick()
            reply = self.request(
                "GET", self.rest_uri(index, f"/v1/models/{model}/metadata"), None, deadline
            )
            if reply.status_code != 200:
                raise ModelServerError(_error_text(reply), reply.status_code)
            self._metadata[model] = json.loads(reply.content)
        return self._metadata[model]


def _split_uri(uri: str) -> tuple[int, str]:
    """http://127.0.0.1:PORT/path -> (PORT, /path)."""
    rest = uri.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    return int(hostport.rpartition(":")[2] or 80), "/" + path


class _Connection:
    """A minimal keep-alive HTTP/1.1 client for the model server (Content-Length or chunked)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.buffer = b""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.buffer = b""

    def exchange(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, str, list[tuple[str, str]], bytes, bool]:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.sock.sendall(head.encode("latin-1") + b"\r\n" + (body or b""))
        header_block = self._read_until(b"\r\n\r\n")
        lines = header_block.decode("latin-1").split("\r\n")
        version, status, reason = [*lines[0].split(" ", 2), ""][:3]
        headers = []
        length = None
        chunked = False
        keep = version == "HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            lower = name.lower()
            if lower == "content-length":
                length = int(value)
            elif lower == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif lower == "connection":
                keep = value.lower() != "close" if keep else value.lower() == "keep-alive"
        if chunked:
            content = self._read_chunked()
        elif length is not None:
            content = self._read_exactly(length)
        else:
            content, keep = self._read_to_close(), False
        return int(status), reason, headers, content, keep

    def _fill(self) -> None:
        assert self.sock is not None
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("the model server closed the connection")
        self.buffer += data

    def _read_until(self, marker: bytes) -> bytes:
        while (index := self.buffer.find(marker)) < 0:
            self._fill()
        found, self.buffer = self.buffer[:index], self.buffer[index + len(marker) :]
        return found

    def _read_exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            self._fill()
        found, self.buffer = self.buffer[:count], self.buffer[count:]
        return found

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self._read_until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                self._read_until(b"\r\n")
                return b"".join(parts)
            parts.append(self._read_exactly(size))
            self._read_exactly(2)

    def _read_to_close(self) -> bytes:
        assert self.sock is not None
        while data := self.sock.recv(262144):
            self.buffer += data
        found, self.buffer = self.buffer, b""
        return found


def _response(
    uri: str,
    status: int,
    reason: str,
    headers: list[tuple[str, str]],
    content: bytes,
    elapsed: float,
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.reason = reason
    response.headers = CaseInsensitiveDict(headers)
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


# gRPC status code name -> the HTTP status TF Serving's REST API answers for it
_HTTP_STATUS = {
    "CANCELLED": 499,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "UNAUTHENTICATED": 401,
}


def _grpc_error(exc: Any) -> ModelServerError:
    code = exc.code()
    name = code.name if code is not None else "UNKNOWN"
    status = _HTTP_STATUS.get(name, 500)
    details = exc.details() or name
    if name == "UNAVAILABLE":
        return ModelServerUnavailable(f"The model server is unavailable: {details}")
    if name == "DEADLINE_EXCEEDED":
        return ModelServerTimeout("The model server did not answer before the request deadline")
    return ModelServerError(details, status)
