"""TF Serving's REST API as a thin ASGI layer over the data plane.

Connections are handled by the event loop; each request's work (JSON parsing, the model call,
JSON writing) runs on a pool of --rest_api_num_threads threads, as TF Serving's HTTP server
does, with --rest_api_timeout_in_ms as the deadline (504 when it passes).
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
import time
import urllib.parse
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tfs_model_server.codec.example_request import classify_regress_request
from tfs_model_server.codec.json_reader import loads
from tfs_model_server.codec.predict_request import predict_inputs
from tfs_model_server.codec.proto_json import metadata_json, status_json
from tfs_model_server.codec.request_object import predict_signature_name
from tfs_model_server.codec.responses import (
    classify_response,
    error_body,
    predict_response,
    regress_response,
)
from tfs_model_server.core.dataplane import DataPlane, ModelRef
from tfs_model_server.core.servable import CLASSIFY_METHOD, REGRESS_METHOD
from tfs_model_server.errors import Code, ServingError, invalid_argument
from tfs_rest_json.model_version import is_model_version

log = logging.getLogger(__name__)

_PREDICT = re.compile(
    r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)",
    re.IGNORECASE,
)
_STATUS = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE,
)
_V1 = re.compile(r"/v1/.*", re.IGNORECASE)
_VERBS = ("classify", "regress", "predict")
_MAX_UNCOMPRESSED = 100 * 1024 * 1024
_JSON = [(b"content-type", b"application/json")]


@dataclass
class Reply:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]]


def _error(code: Code, message: str) -> Reply:
    return Reply(code.http_status, error_body(message), _JSON)


def _ref(name: str, version: str | None, label: str | None, signature: str = "") -> ModelRef:
    parsed = None
    if version is not None:
        try:
            parsed = int(version)
        except ValueError:
            raise invalid_argument(f"Failed to convert version: {version} to numeric.") from None
        if not is_model_version(parsed):
            raise invalid_argument(f"Failed to convert version: {version} to numeric.")
    return ModelRef(
        urllib.parse.unquote(name),
        parsed,
        urllib.parse.unquote(label) if label else None,
        signature,
    )


class RestApi:
    """ASGI application: /v1/models/... plus the Prometheus path when monitoring is on."""

    def __init__(
        self,
        plane: DataPlane,
        *,
        num_threads: int,
        timeout_ms: int,
        metrics_path: str | None = None,
        enable_cors: bool = False,
    ) -> None:
        self.plane = plane
        self.executor = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="rest")
        self.timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None
        self.metrics_path = metrics_path
        self.enable_cors = enable_cors

    # ----- ASGI -------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else scope["path"]
        body = await self._body(receive)
        headers = dict(scope.get("headers") or [])
        try:
            reply = await self._dispatch(method, path, body, headers)
        except Exception:  # never a stack trace to the client
            log.exception("REST %s %s failed", method, path)
            reply = _error(Code.INTERNAL, "Internal error while handling the request")
        if self.enable_cors:
            reply.headers = [
                *reply.headers,
                (b"access-control-allow-origin", b"*"),
                (b"access-control-allow-methods", b"POST, GET"),
                (b"access-control-allow-headers", b"Content-Type"),
            ]
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [*reply.headers, (b"content-length", str(len(reply.body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": reply.body})

    @staticmethod
    async def _body(receive) -> bytes:
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _dispatch(self, method: str, path: str, body: bytes, headers: dict) -> Reply:
        if self.metrics_path and path == self.metrics_path and method == "GET":
            return Reply(200, self.plane.metrics.render(), [(b"content-type", b"text/plain")])
        if not _V1.fullmatch(path):
            return Reply(404, error_body("Not Found"), _JSON)
        if method == "OPTIONS":
            origin = headers.get(b"origin", b"").decode("latin-1")
            if re.match(r"https?://", origin):
                return Reply(200, b"", _JSON)
            return _error(Code.FAILED_PRECONDITION, "CORS preflight requires an http(s) Origin")
        if b"gzip" in headers.get(b"content-encoding", b"").lower():
            try:
                body = _gunzip(body)
            except ServingError as exc:
                return _error(exc.code, exc.message)
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        work = loop.run_in_executor(self.executor, self.handle, method, path, body, deadline)
        try:
            return await asyncio.wait_for(work, self.timeout_s + 1 if self.timeout_s else None)
        except TimeoutError:
            return _error(Code.DEADLINE_EXCEEDED, "Request timed out (rest_api_timeout_in_ms)")

    # ----- the request handler (runs on a worker thread) ---------------------------------
    def handle(self, method: str, path: str, body: bytes, deadline: float | None) -> Reply:
        start = time.perf_counter()
        api, model_name = "", ""
        try:
            # As in TF Serving, the path patterns ignore case but the verb and `metadata` are
            # compared exactly: `:PREDICT` is malformed, `/METADATA` asks for the status.
            if method == "POST" and (m := _PREDICT.fullmatch(path)) and m[4] in _VERBS:
                name, version, label, verb = m.groups()
                api, model_name = verb, urllib.parse.unquote(name)
                reply = self._post(verb, name, version, label, body, deadline)
            elif method == "GET" and (m := _STATUS.fullmatch(path)):
                name, version, label, subresource = m.groups()
                if not name:
                    raise invalid_argument("Missing model name in request.")
                meta = subresource == "metadata"
                api, model_name = ("metadata" if meta else "status"), urllib.parse.unquote(name)
                ref = _ref(name, version, label)
                if meta:
                    reply = Reply(200, metadata_json(self.plane.metadata(ref)), _JSON)
                else:
                    reply = Reply(200, status_json(self.plane.status(ref)), _JSON)
            else:
                raise invalid_argument(f"Malformed request: {method} {path}")
        except ServingError as exc:
            if model_name:
                self.plane.metrics.record_request(model_name, api, exc.code.name)
            return _error(exc.code, exc.message)
        if model_name:
            self.plane.metrics.record_success(model_name, api, "REST", start)
        return reply

    def _post(
        self,
        verb: str,
        name: str,
        version: str | None,
        label: str | None,
        body: bytes,
        deadline: float | None,
    ) -> Reply:
        ref = _ref(name, version, label)
        ref.check()
        doc = loads(body)
        if verb == "predict":
            return self._predict(ref, doc, deadline)
        signature, examples, context = classify_regress_request(doc, verb)
        ref = ModelRef(ref.name, ref.version, ref.label, signature)
        parsed = lambda: (examples, context)  # noqa: E731 - the JSON is read before the model
        if verb == "classify":
            result = self.plane.infer(ref, CLASSIFY_METHOD, parsed, deadline)
            return Reply(200, classify_response(result.classifications or []), _JSON)
        result = self.plane.infer(ref, REGRESS_METHOD, parsed, deadline)
        return Reply(200, regress_response(result.regressions or []), _JSON)

    def _predict(self, ref: ModelRef, doc, deadline: float | None) -> Reply:
        signature_name = predict_signature_name(doc)
        row_format: list[bool] = []

        def inputs(signature):
            tensors, row = predict_inputs(doc, signature.inputs)
            row_format.append(row)
            return tensors

        with self.plane.held(ref) as servable:
            if signature_name not in servable.signatures:
                raise invalid_argument(
                    f'Serving signature name: "{signature_name}" not found in signature def'
                )
            result = self.plane.predict_on(servable, signature_name, inputs, (), deadline)
        return Reply(200, predict_response(result.outputs, row_format[0]), _JSON)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _gunzip(body: bytes) -> bytes:
    try:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(body, _MAX_UNCOMPRESSED + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise invalid_argument(f"Failed to decompress the gzip request body: {exc}") from exc
    if len(out) > _MAX_UNCOMPRESSED:
        raise invalid_argument("Uncompressed request body exceeds the 100 MB limit")
    return out
