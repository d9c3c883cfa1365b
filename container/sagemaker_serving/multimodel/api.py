"""The multi-model HTTP API on the Python service: /models, /models/<name>, .../invoke.

Thin falcon (ASGI) resources over MultiModelManager. Lists and gets read one small file:
they run on the event loop, so nothing waiting elsewhere holds them up. Loads and unloads wait
on pip, imports, locks and the model server: they run on threads of their own (one pool
each, so loads that hang hold up no unload), with the load's deadline counted from its
arrival; an invocation's lookup runs on the handlers' threads. Each model's handlers come from
ModelCode.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import falcon.asgi
import orjson
from falcon.asgi import Request, Response

from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.errors import brief
from sagemaker_serving.multimodel.code import ModelCode
from sagemaker_serving.multimodel.environments import ModelEnvironments
from sagemaker_serving.multimodel.errors import MultiModelError
from sagemaker_serving.multimodel.manager import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MultiModelManager,
)
from sagemaker_serving.multimodel.registry import LoadedModel, Registry
from sagemaker_serving.user_code.loading import Handlers

if TYPE_CHECKING:
    from sagemaker_serving.service.invocations import Invocations

log = logging.getLogger(__name__)

PREFIX = "/models/"
INVOKE_SUFFIX = "/invoke"
MAX_ERROR_CHARS = 2048  # an error quotes names and urls: never a whole huge one
LOAD_THREADS = 64  # loads at once per worker; more wait their turn, within their deadline
UNLOAD_THREADS = 8


def _public(exc: MultiModelError, *sent: str | None) -> MultiModelError:
    """The error as the app's error answer writes it: at most MAX_ERROR_CHARS, and what the
    client `sent` (a url, a name) quoted as sent, as the AWS container does (`Could not find
    valid base path /opt/ml/models/x for servable x`); other paths are made model-relative by
    the one error writer (errors.public_text)."""
    quoted = [text for text in sent if text]
    return MultiModelError(brief(exc.message, MAX_ERROR_CHARS), exc.status, quoted)


def _ok(resp: Response, doc: dict) -> None:
    resp.content_type = "application/json"
    resp.data = orjson.dumps(doc) + b"\n"


def _description(model: LoadedModel) -> dict:
    return {"modelName": model.name, "modelUrl": model.url}


class ModelsResource:
    """GET /models (paged list), POST /models (load)."""

    def __init__(self, manager: MultiModelManager, code: ModelCode):
        self.manager = manager
        self.code = code
        self.loads = ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="mme-load")

    async def on_get(self, req: Request, resp: Response) -> None:
        token = req.get_param("next_page_token")
        try:
            limit = _limit(req.get_param("limit"))
            models, next_token = self.manager.page(limit, token)
        except MultiModelError as exc:
            raise _public(exc, token) from None
        doc: dict = {"models": [_description(m) for m in models]}
        if next_token is not None:
            doc["nextPageToken"] = next_token
        _ok(resp, doc)

    async def on_post(self, req: Request, resp: Response) -> None:
        deadline = time.monotonic() + self.manager.load_timeout_seconds  # from its arrival
        name = url = ""
        try:
            name, url = _load_request(req, await req.stream.read())
            model = await asyncio.get_running_loop().run_in_executor(
                self.loads,
                self.manager.load,
                name,
                url,
                self.code.prepare,
                self.code.abandon,
                deadline,
            )
        except MultiModelError as exc:
            raise _public(exc, url, name) from None
        ports = self.manager.client
        rest = ", ".join(map(str, ports.rest_ports))
        grpc = ", ".join(map(str, ports.grpc_ports))
        success = (
            f"Successfully loaded model {name}, listening on rest port {rest} and grpc port {grpc}."
        )
        _ok(resp, {"success": success, **_description(model)})


class ModelSink:
    """/models/<name> (GET, DELETE) and /models/<name>/invoke (POST); names are opaque, so
    they are read from the raw (still percent-encoded) path."""

    def __init__(
        self,
        manager: MultiModelManager,
        code: ModelCode,
        invocations: Invocations,
    ):
        self.manager = manager
        self.code = code
        self.invocations = invocations
        self.unloads = ThreadPoolExecutor(UNLOAD_THREADS, thread_name_prefix="mme-unload")

    async def __call__(self, req: Request, resp: Response | None, **_: Any) -> None:
        assert resp is not None  # None only for WebSocket, which the service does not take
        raw = req.scope.get("raw_path") or req.path.encode()
        path = urlsplit(raw.decode("latin-1")).path
        rest = path[len(PREFIX) :] if path.startswith(PREFIX) else ""
        invoke = rest.endswith(INVOKE_SUFFIX)
        name = ""
        try:
            name = _decoded(rest[: -len(INVOKE_SUFFIX)] if invoke else rest)
            if not name:
                raise MultiModelError("Not Found", 404)
            if invoke:
                await self._invoke(req, resp, name)
            elif req.method in ("GET", "HEAD"):
                _ok(resp, _description(self.manager.get(name)))
            elif req.method == "DELETE":
                await asyncio.get_running_loop().run_in_executor(
                    self.unloads, self.manager.unload, name, self.code.release
                )
                _ok(resp, {"success": f"Successfully unloaded model {name}."})
            else:
                resp.set_header("Allow", "GET, HEAD, DELETE")
                raise MultiModelError("Method Not Allowed", 405)
        except MultiModelError as exc:
            raise _public(exc, name) from None

    async def _invoke(self, req: Request, resp: Response, name: str) -> None:
        if req.method != "POST":
            resp.set_header("Allow", "POST")
            raise MultiModelError("Method Not Allowed: use POST", 405)
        # on the handlers' threads: the loop's default ones may all be waiting on loads
        place = self.invocations.placement
        model, handlers = await place.thread(self._model_and_handlers, name)
        await self.invocations.respond(req, resp, handlers, model.internal_name, label=name)

    def _model_and_handlers(self, name: str) -> tuple[LoadedModel, Handlers]:
        """The loaded model and its handlers (imported on first use); handler processes that
        were found gone are started again first."""
        model = self.manager.get(name)
        try:
            handlers = self.code.handlers(model)
            if handlers.remote is not None and handlers.remote.unreachable:
                taken_over = handlers.remote.taken_over
                handlers.remote.unreachable = handlers.remote.taken_over = False  # once a failure
                model = self.code.revive(model, taken_over)
                handlers = self.code.handlers(model)
            return model, handlers
        except MultiModelError:
            raise
        except Exception as exc:
            log.exception("importing the handlers of model %s failed", name)
            raise MultiModelError(f"Model {name}: {type(exc).__name__}: {exc}", 500) from None


def _decoded(name: str) -> str:
    """The model name in the path, percent-decoded: 400 when the bytes it encodes are no
    UTF-8 (never a name other than the one sent, with U+FFFD in their place)."""
    try:
        return unquote(name, errors="strict")
    except UnicodeDecodeError:
        raise _not_utf8("The model name in the path") from None


def _not_utf8(what: str) -> MultiModelError:
    return MultiModelError(f"{what} is not valid UTF-8 once percent-decoded", 400)


def _limit(text: str | None) -> int:
    if text is None or text == "":
        return DEFAULT_PAGE_SIZE
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE_SIZE:
        raise MultiModelError(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}", 400)
    return int(text)


def _load_request(req: Request, body: bytes) -> tuple[str, str]:
    """model_name and url from the JSON body (documented) or the query string (MMS style)."""
    doc: object = {}
    if body.strip():
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise MultiModelError(f"The request body is not valid JSON: {exc}", 400) from None
    if not isinstance(doc, dict):
        raise MultiModelError('Expected a JSON object {"model_name": ..., "url": ...}', 400)
    try:
        query = parse_qs(req.query_string, errors="strict")
    except UnicodeDecodeError:
        raise _not_utf8("The query string") from None
    name = doc.get("model_name", query.get("model_name", [None])[0])
    url = doc.get("url", query.get("url", [None])[0])
    if name is None or url is None:
        missing = ", ".join(k for k, v in (("model_name", name), ("url", url)) if v is None)
        raise MultiModelError(f"Missing {missing} in the load request", 400)
    if not isinstance(name, str) or not isinstance(url, str):
        raise MultiModelError("model_name and url must be strings", 400)
    return name, url


def add_routes(
    app: falcon.asgi.App,
    config: ServiceConfig,
    invocations: Invocations,
    universal: Handlers | None,
) -> None:
    """The /models API on the service's app: the manager over the shared registry, each
    model's code (its environment, or `universal`: the universal code's handlers)."""
    manager = MultiModelManager(
        Registry(Path(config.state_dir)),
        invocations.client,
        Path(config.model_root),
        config.load_timeout_seconds,
        config.memory_reserve_bytes,
    )
    code = ModelCode(universal, ModelEnvironments(config), manager.registry, config.threads)
    app.add_route("/models", ModelsResource(manager, code))
    app.add_sink(ModelSink(manager, code, invocations), prefix="/models/")
