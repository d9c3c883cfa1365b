"""The multi-model HTTP API on the Python service: /models, /models/<name>, .../invoke.

Thin falcon resources over MultiModelManager; each model's handlers come from its own code/
(inference.py, lib/, requirements.txt installed at load) or else the universal code dir.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import falcon
import orjson

from sagemaker_serving.multimodel.manager import LoadedModel, MultiModelError, MultiModelManager
from sagemaker_serving.service.user_code import (
    Handlers,
    RequirementsTimeout,
    UserCodeError,
    code_paths,
    has_user_code,
    install_requirements,
    load_handlers,
)

if TYPE_CHECKING:
    from sagemaker_serving.service.invocations import Invocations

log = logging.getLogger(__name__)

PREFIX = "/models/"
INVOKE_SUFFIX = "/invoke"


def _error(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = "application/json"
    resp.data = orjson.dumps({"error": message}) + b"\n"


def _ok(resp: falcon.Response, doc: dict) -> None:
    resp.content_type = "application/json"
    resp.data = orjson.dumps(doc) + b"\n"


def _description(model: LoadedModel) -> dict:
    return {"modelName": model.name, "modelUrl": model.url}


class ModelCode:
    """Per-model handlers in this worker, imported on first use and cached."""

    def __init__(
        self,
        universal_dir: Path | None,
        universal_paths: list[str],
        packages_root: Path,
        timeout: float,
    ) -> None:
        self.universal_dir = universal_dir
        self.universal_paths = universal_paths  # its code/, lib and requirements (at start)
        self.packages_root = packages_root
        self.timeout = timeout
        self._cache: dict[tuple[str, str], Handlers] = {}
        self._lock = threading.Lock()

    def code_dir(self, model: LoadedModel) -> Path | None:
        if has_user_code(model.code_dir):
            return model.code_dir
        if self.universal_dir is not None and has_user_code(self.universal_dir):
            return self.universal_dir
        return None

    def install(self, model: LoadedModel, deadline: float) -> None:
        """The model's own requirements.txt, into a directory of its own, before the load
        goes on (MultiModelManager.load's `prepare`): 400 when pip fails, 504 past the
        deadline."""
        target = self.packages_root / model.internal_name
        try:
            install_requirements(model.code_dir, target, max(1.0, deadline - time.monotonic()))
        except UserCodeError as exc:
            shutil.rmtree(target, ignore_errors=True)
            status = 504 if isinstance(exc, RequirementsTimeout) else 400
            raise MultiModelError(f"Model {model.name}: {exc}", status) from None

    def handlers(self, model: LoadedModel) -> Handlers:
        key = (model.internal_name, model.url)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._load(model)
            return self._cache[key]

    def _load(self, model: LoadedModel) -> Handlers:
        code_dir = self.code_dir(model)
        if code_dir is None:
            return Handlers()
        if code_dir == self.universal_dir:
            paths = self.universal_paths
        else:
            installed = self.packages_root / model.internal_name
            paths = code_paths(code_dir, installed if installed.is_dir() else None)
        return load_handlers(
            code_dir, module_name=f"inference_{model.internal_name}", paths=paths, keep=False
        )

    def forget(self, model: LoadedModel) -> None:
        with self._lock:
            self._cache.pop((model.internal_name, model.url), None)


class ModelsResource:
    """GET /models (paged list), POST /models (load)."""

    def __init__(self, manager: MultiModelManager, code: ModelCode) -> None:
        self.manager = manager
        self.code = code

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            limit = _limit(req.get_param("limit"))
            models, next_token = self.manager.page(limit, req.get_param("next_page_token"))
        except MultiModelError as exc:
            _error(resp, exc.status, exc.message)
            return
        doc: dict = {"models": [_description(m) for m in models]}
        if next_token is not None:
            doc["nextPageToken"] = next_token
        _ok(resp, doc)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            name, url = _load_request(req)
            model = self.manager.load(name, url, prepare=self.code.install)
        except MultiModelError as exc:
            _error(resp, exc.status, exc.message)
            return
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

    def __init__(self, manager: MultiModelManager, code: ModelCode, invocations: Invocations):
        self.manager = manager
        self.code = code
        self.invocations = invocations

    def __call__(self, req: falcon.Request, resp: falcon.Response, **_: str) -> None:
        raw = req.env.get("RAW_URI") or req.env.get("REQUEST_URI") or req.path
        path = urlsplit(raw).path
        rest = path[len(PREFIX) :] if path.startswith(PREFIX) else ""
        invoke = rest.endswith(INVOKE_SUFFIX)
        name = unquote(rest[: -len(INVOKE_SUFFIX)] if invoke else rest)
        try:
            if not name:
                raise MultiModelError("Not Found", 404)
            if invoke:
                self._invoke(req, resp, name)
            elif req.method in ("GET", "HEAD"):
                _ok(resp, _description(self.manager.get(name)))
            elif req.method == "DELETE":
                model = self.manager.get(name)
                self.manager.unload(name)
                self.code.forget(model)
                _ok(resp, {"success": f"Successfully unloaded model {name}."})
            else:
                resp.set_header("Allow", "GET, HEAD, DELETE")
                raise MultiModelError("Method Not Allowed", 405)
        except MultiModelError as exc:
            _error(resp, exc.status, exc.message)

    def _invoke(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if req.method != "POST":
            resp.set_header("Allow", "POST")
            raise MultiModelError("Method Not Allowed: use POST", 405)
        model = self.manager.get(name)
        try:
            handlers = self.code.handlers(model)
        except Exception as exc:
            log.exception("importing the handlers of model %s failed", name)
            raise MultiModelError(f"Model {name}: {type(exc).__name__}: {exc}", 500) from None
        self.invocations.respond(req, resp, handlers, model.internal_name, label=name)


def _limit(text: str | None) -> int:
    from sagemaker_serving.multimodel.manager import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

    if text is None or text == "":
        return DEFAULT_PAGE_SIZE
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE_SIZE:
        raise MultiModelError(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}", 400)
    return int(text)


def _load_request(req: falcon.Request) -> tuple[str, str]:
    """model_name and url from the JSON body (documented) or the query string (MMS style)."""
    body = req.bounded_stream.read()
    doc: object = {}
    if body.strip():
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise MultiModelError(f"The request body is not valid JSON: {exc}", 400) from None
    if not isinstance(doc, dict):
        raise MultiModelError('Expected a JSON object {"model_name": ..., "url": ...}', 400)
    query = parse_qs(urlsplit(req.env.get("RAW_URI") or req.relative_uri).query)
    name = doc.get("model_name", (query.get("model_name") or [None])[0])
    url = doc.get("url", (query.get("url") or [None])[0])
    if name is None or url is None:
        missing = ", ".join(k for k, v in (("model_name", name), ("url", url)) if v is None)
        raise MultiModelError(f"Missing {missing} in the load request", 400)
    if not isinstance(name, str) or not isinstance(url, str):
        raise MultiModelError("model_name and url must be strings", 400)
    return name, url


__all__ = ["ModelCode", "ModelSink", "ModelsResource"]
