"""Run the Python service under gunicorn (embedded), from the JSON config serve wrote.

python -m sagemaker_serving.service_main CONFIG.json --bind unix:SOCKET [gunicorn options]
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from . import log_setup
from .front_metrics import FrontMetricsReceiver
from .python_service import ServiceConfig, create_app
from .service_metrics import ServiceMetrics
from .settings import LOG_FORMATS


class ServiceLogger(glogging.Logger):
    """gunicorn's own lines through our handlers (log_setup), and no access lines: nginx
    writes those, and gunicorn would format one per request only to drop it."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            logger.handlers.clear()
            logger.propagate = True

    def access(self, resp, req, environ, request_time) -> None:
        return


class ServiceApplication(BaseApplication):
    def __init__(self, config: ServiceConfig, options: dict) -> None:
        self.config_obj = config
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        for path in reversed(self.config_obj.python_paths):
            if path not in sys.path:
                sys.path.insert(0, path)
        return create_app(self.config_obj)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sagemaker_serving.service_main")
    parser.add_argument("config", type=Path)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker-class", default="gthread")
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS)
    parser.add_argument("--front-metrics-fd", type=int, help="inherited socket: front_metrics.py")
    args = parser.parse_args(argv)
    log_setup.configure(args.log_level, args.log_format)
    if args.front_metrics_fd is not None:  # counted in this (gunicorn master) process
        sock = socket.socket(fileno=args.front_metrics_fd)
        FrontMetricsReceiver(sock, ServiceMetrics()).start()
    options = {
        "bind": args.bind,
        "workers": args.workers,
        "threads": args.threads,
        "worker_class": args.worker_class,
        "timeout": args.timeout,
        "graceful_timeout": 3,  # within serve's BACKEND_STOP_SECONDS (serve.py)
        "keepalive": 75,
        "loglevel": args.log_level,
        "accesslog": None,
        "errorlog": "-",
        "logger_class": ServiceLogger,
        "control_socket_disable": True,
    }
    ServiceApplication(ServiceConfig.from_file(args.config), options).run()


if __name__ == "__main__":
    main()
