"""Run the Python service under gunicorn (embedded), from the JSON config serve wrote.

python -m sagemaker_serving.service.main CONFIG.json --bind unix:SOCKET --token-fd FD
    [--front-metrics-fd FD] [gunicorn options]

gunicorn supervises the workers; each worker is uvicorn's event loop (event_loop_worker.py)
running the service's ASGI app.
"""

from __future__ import annotations

import argparse
import os
import socket
import stat
from pathlib import Path

from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from process_utils import no_dump
from sagemaker_serving.config import log_setup
from sagemaker_serving.config.access import read_token
from sagemaker_serving.config.service_config import ServiceConfig
from sagemaker_serving.config.settings import LOG_FORMATS
from sagemaker_serving.frontdoor.front_metrics import FrontMetricsReceiver
from sagemaker_serving.service.app import create_app, guarded
from sagemaker_serving.service.event_loop_worker import WORKER_CLASS
from sagemaker_serving.service.metrics import ServiceMetrics
from sagemaker_serving.service.user_code import UserCodeError


class ServiceLogger(glogging.Logger):
    """gunicorn's own lines through our handlers (log_setup), and no access lines: nginx
    writes those."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            logger.handlers.clear()
            logger.propagate = True

    def access(self, resp, req, environ, request_time) -> None:
        return


class ServiceApplication(BaseApplication):
    def __init__(self, config: ServiceConfig, options: dict, token: str) -> None:
        self.config_obj = config
        self.options = options
        self.token = token
        self.metrics: ServiceMetrics | None = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        """In each worker: the app, and this process's one ServiceMetrics. A worker that
        cannot import the user's handlers leaves the reason for serve's last line."""
        self.metrics = ServiceMetrics()
        try:
            app = create_app(self.config_obj, self.metrics)
        except UserCodeError as exc:
            if self.config_obj.error_file:
                Path(self.config_obj.error_file).write_text(str(exc))
            raise
        return guarded(app, self.token)


def front_metrics_hook(fd: int | None, token: str):
    """gunicorn's post_worker_init: a receiver thread in the worker for serve's reports of
    the requests nginx answered."""

    def post_worker_init(worker) -> None:
        if fd is None or worker.app.metrics is None:
            return
        sock = socket.socket(fileno=fd)  # family and type from the descriptor
        FrontMetricsReceiver(sock, worker.app.metrics, token).start()

    return post_worker_init


def when_ready(server) -> None:
    """gunicorn chowns its unix socket to its own group; in a setgid directory (serve as
    root: service_access.socket_dir) the socket gets the directory's group back, so that
    nginx's workers (and nothing else but root) can connect."""
    for listener in server.LISTENERS:
        address = listener.cfg_addr
        if isinstance(address, str) and not address.startswith("\0"):
            folder = os.stat(os.path.dirname(address))
            if folder.st_mode & stat.S_ISGID:
                os.chown(address, -1, folder.st_gid)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sagemaker_serving.service.main")
    parser.add_argument("config", type=Path)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS)
    parser.add_argument("--umask", type=lambda text: int(text, 8), default=0o177)
    parser.add_argument("--token-fd", type=int, required=True, help="service_access.token_fd")
    parser.add_argument("--front-metrics-fd", type=int, help="inherited socket: front_metrics.py")
    args = parser.parse_args(argv)
    log_setup.configure(args.log_level, args.log_format)
    token = read_token(args.token_fd)
    no_dump.make_non_dumpable()  # the secret is in memory (gunicorn's workers inherit this)
    options = {
        "bind": args.bind,
        "umask": args.umask,
        "workers": args.workers,
        "worker_class": WORKER_CLASS,
        "timeout": args.timeout,
        "graceful_timeout": 3,  # within serve's BACKEND_STOP_SECONDS (serve.py)
        "keepalive": 75,
        "loglevel": args.log_level,
        "accesslog": None,
        "errorlog": "-",
        "logger_class": ServiceLogger,
        "control_socket_disable": True,
        "when_ready": when_ready,
        "post_worker_init": front_metrics_hook(args.front_metrics_fd, token),
    }
    ServiceApplication(ServiceConfig.from_file(args.config), options, token).run()


if __name__ == "__main__":
    main()
