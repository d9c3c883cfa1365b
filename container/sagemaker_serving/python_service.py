"""The Python service (gunicorn + falcon, behind nginx): its wiring, run by serve as

    python -m sagemaker_serving.python_service CONFIG.json

Its settings (gunicorn's socket, workers, timeout and log level, the log format, the models'
ports, ...) are all in CONFIG.json (config/service_config.py, written by serve). Its socket is
in a folder of serve's user only (config/access.py): only the stack reaches it.

gunicorn supervises the workers; each worker is uvicorn's event loop (service/
event_loop_worker.py) running falcon's ASGI app made here: /invocations (service/
invocations.py: input_handler -> model server -> output_handler, or the built-in formats),
/ping, /metrics, and on a multi-model endpoint the /models API (multimodel/).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import falcon
import falcon.asgi
from falcon.asgi import Request, Response
from gunicorn import glogging
from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.errors import HaltServer

from sagemaker_serving.config import log_setup
from sagemaker_serving.config.access import SOCKET_UMASK
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.environments.build import has_user_code
from sagemaker_serving.environments.hidden import import_handlers
from sagemaker_serving.environments.remote import pool_handlers
from sagemaker_serving.errors import error_body, hide_paths
from sagemaker_serving.multimodel.api import add_routes as add_multi_model_routes
from sagemaker_serving.service.error_answers import add_error_answers
from sagemaker_serving.service.event_loop_worker import WORKER_CLASS
from sagemaker_serving.service.invocations import Invocations
from sagemaker_serving.service.metrics import MetricsPage, ServiceMetrics
from sagemaker_serving.service.placement import Placement
from sagemaker_serving.service.readiness import Ping
from sagemaker_serving.service.streaming import RECEIVE, StreamCut
from sagemaker_serving.tfs_client.health import InstanceWatch
from sagemaker_serving.user_code import fork_guard
from sagemaker_serving.user_code.loading import Handlers, UserCodeError

log = logging.getLogger("sagemaker_serving.service")


def endpoint_handlers(config: ServiceConfig) -> Handlers:
    """A single-model endpoint's handlers: imported here, or (config.handler_pool) run by the
    pool serve started, once it is ready."""
    code_dir = Path(config.code_dir)
    if not config.handler_pool:
        return import_handlers(code_dir, paths=config.python_paths)
    deadline = time.monotonic() + config.load_timeout_seconds
    return pool_handlers(
        Path(config.handler_pool), code_dir / "inference.py", config.threads, deadline
    )


def allowed_methods(resource: object) -> list[str]:
    """The methods a resource answers (its on_* responders), OPTIONS aside."""
    return [
        name[3:].upper()
        for name in dir(resource)
        if name.startswith("on_") and name != "on_options" and callable(getattr(resource, name))
    ]


class NoOptions:
    """Middleware: OPTIONS is 405 (JSON, `Allow`: what the route answers), not falcon's 200."""

    async def process_resource(
        self, req: Request, resp: Response, resource: object, params: dict
    ) -> None:
        if req.method == "OPTIONS":
            raise falcon.HTTPMethodNotAllowed(allowed_methods(resource))


RUN_DIR_PLACEHOLDER = "<run dir>"
HANDLER_PROCESSES_PLACEHOLDER = "<handler processes>"
OVERDUE_GRACE_SECONDS = 5.0  # with the request's time limit again, past its deadline: stuck


def internal_paths(config: ServiceConfig) -> dict[str, str]:
    """The folders no answer names (errors.hide_paths), and what it says instead: paths
    under the model directory become model-relative, the run directory (environments,
    venvs) and the handler processes' folder placeholders."""
    paths = {}
    if config.run_dir:
        paths[config.run_dir] = RUN_DIR_PLACEHOLDER
    if config.handler_pool:
        paths[config.handler_pool] = HANDLER_PROCESSES_PLACEHOLDER
    if config.model_root:
        paths[config.model_root] = ""
    if config.code_dir and not config.multi_model:  # the model directory as serve was given it
        paths.setdefault(str(Path(config.code_dir).absolute().parent), "")
    return paths


def create_app(config: ServiceConfig, metrics: ServiceMetrics | None = None) -> falcon.asgi.App:
    """The falcon app; imports the user's handlers (a failure stops the worker). `metrics`:
    this process's ServiceMetrics (one per process: two would overwrite each other's values
    in the multiprocess files)."""
    hide_paths(internal_paths(config))
    handlers = Handlers() if config.multi_model else endpoint_handlers(config)
    log.info("handlers: %s", "per model" if config.multi_model else handlers.source)
    metrics = metrics or ServiceMetrics()
    # a call still running at twice its request's time limit, and 5 s more, is one that never
    # returns (placement.py); a slow one past its 504 finishes before (test_async_endpoint.py)
    overdue = 2 * config.request_timeout_seconds + OVERDUE_GRACE_SECONDS
    placement = Placement(config.worker_class, config.threads, overdue)
    app = falcon.asgi.App(middleware=[NoOptions()])
    invocations = Invocations(config, handlers, metrics, placement)
    app.add_route("/invocations", invocations)
    watch = InstanceWatch(config.rest_ports, config.models)
    watch.start()  # in this worker, before its first /ping
    app.add_route("/ping", Ping(handlers, watch))
    app.add_route("/metrics", MetricsPage(metrics, placement))
    if config.multi_model:
        code_dir = Path(config.code_dir) if config.code_dir else None
        universal = endpoint_handlers(config) if code_dir and has_user_code(code_dir) else None
        add_multi_model_routes(app, config, invocations, universal)
    add_error_answers(app)
    return app


_REQUEST_ID_NAME = b"x-request-id"
_FAILED = "Internal Server Error"

Asgi = Any  # an ASGI application: async (scope, receive, send)


def guarded(app: Asgi) -> Asgi:
    """The ASGI app, whatever escapes it before an answer started answered with a JSON 500,
    never uvicorn's plain-text page."""

    async def asgi(scope: dict, receive: Any, send: Any) -> None:
        scope[RECEIVE] = receive  # a streamed answer watches for the client going away
        try:
            await app(scope, receive, send)
        except StreamCut:
            return  # uvicorn ends the connection without the answer's last chunk
        except Exception:
            log.exception("unhandled error in the service")
            request_id = dict(scope.get("headers") or ()).get(_REQUEST_ID_NAME, b"")
            body = error_body(_FAILED, request_id.decode("latin-1"))
            head = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
                (b"connection", b"close"),
            ]
            with contextlib.suppress(RuntimeError):  # uvicorn's: the answer had started
                await send({"type": "http.response.start", "status": 500, "headers": head})
                await send({"type": "http.response.body", "body": body})

    return asgi


class ServiceLogger(glogging.Logger):
    """gunicorn's own lines through our handlers (log_setup); no access lines (accesslog is
    None: nginx writes those)."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            logger.handlers.clear()
            logger.propagate = True


class ServiceApplication(BaseApplication):
    def __init__(self, config: ServiceConfig, options: dict) -> None:
        self.config_obj = config
        self.options = options
        self.metrics: ServiceMetrics | None = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        """In each worker: the app, and this process's one ServiceMetrics. A worker that
        cannot import the user's handlers leaves the reason for serve's last line and ends
        (gunicorn then stops: a worker failed to boot); the first one to fail logs the
        import's traceback, none gunicorn's own."""
        self.metrics = ServiceMetrics()
        bound = self.config_obj.socket_path
        # a child the user's code forks closes nginx's connections: it never answers one
        fork_guard.close_in_children(lambda: fork_guard.sockets_bound_to(bound))
        try:
            app = create_app(self.config_obj, self.metrics)
        except UserCodeError as exc:
            if _first_to_say(self.config_obj.error_file, str(exc)):
                cause = exc.__cause__
                log.error(
                    "%s", exc, exc_info=(type(cause), cause, cause.__traceback__) if cause else None
                )
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
        gc.freeze()  # what the worker holds from now on is never garbage: no collection walks it
        return guarded(app)


def _first_to_say(path: str, message: str) -> bool:
    """Write `message` to `path` unless another worker did first (True: this one did)."""
    if not path:
        return True
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(message)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sagemaker_serving.python_service")
    parser.add_argument("config", type=Path, help="its settings: config/service_config.py")
    args = parser.parse_args(argv)
    config = ServiceConfig.from_file(args.config)
    log_setup.configure(config.log_level, config.log_format)
    options = {
        "bind": f"unix:{config.socket_path}",
        "umask": SOCKET_UMASK,
        "workers": config.workers,
        "worker_class": WORKER_CLASS,
        "timeout": config.worker_timeout_seconds,
        "graceful_timeout": 3,  # within serve's BACKEND_STOP_SECONDS (serve.py)
        "keepalive": 75,
        "loglevel": config.log_level,
        "accesslog": None,
        "errorlog": "-",
        "logger_class": ServiceLogger,
        "control_socket_disable": True,
    }
    try:
        ServiceApplication(config, options).run()
    except HaltServer as exc:  # gunicorn raises it again when two workers failed to boot
        sys.exit(exc.exit_status)


if __name__ == "__main__":
    main()
