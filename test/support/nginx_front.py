"""serve's nginx, with the config serve writes, in front of stand-in backends: a model server on
a loopback port and a Python service on its unix socket, each an http.server handler class."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from loopback import serving
from process_utils import free_port, terminate
from sagemaker_serving.config.access import SOCKET_UMASK
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import find_nginx, nginx_conf

START_SECONDS = 20.0


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # BaseHTTPRequestHandler wants a client address
        request, _ = super().get_request()
        return request, ("local", 0)


def _as_gunicorn_leaves_it(path: Path) -> None:
    """The stand-in's socket as the service's is (gunicorn's umask): serve's user's only."""
    os.chmod(path, 0o777 & ~SOCKET_UMASK)


@contextlib.contextmanager
def front_door(
    tmp_path: Path,
    env: dict[str, str],
    user_code: bool,
    model_server: type[BaseHTTPRequestHandler] | None,
    service: type[BaseHTTPRequestHandler],
) -> Iterator[int]:
    """nginx as serve configures it, its backends the stand-ins (no model server: its port
    refuses); yields its port."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env(env)
    sockets = Path(tempfile.mkdtemp(prefix="sagemaker-service-"))
    socket_path = sockets / "gunicorn.sock"
    tfs = ThreadingHTTPServer(("127.0.0.1", 0), model_server or BaseHTTPRequestHandler)
    python_service = UnixHTTPServer(str(socket_path), service)
    _as_gunicorn_leaves_it(socket_path)
    port = free_port()
    multi_model = settings.multi_model
    conf = nginx_conf(
        settings,
        find_nginx(),
        tmp_path,
        listen=f"127.0.0.1:{port}",
        default_model="" if multi_model else "m",
        rest_ports=[tfs.server_address[1]],
        service_socket=str(socket_path),
        user_code=user_code,
        shutdown_grace=1,
        counts_path="/dev/null",
    )
    conf.write()
    conf.ready_file.touch()
    if not model_server:
        tfs.server_close()  # its port refuses
    with contextlib.ExitStack() as backends:
        if model_server:
            backends.enter_context(serving(tfs))
        backends.enter_context(serving(python_service))
        log = (tmp_path / "nginx.log").open("wb")
        nginx = subprocess.Popen(conf.command(), stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                assert time.monotonic() < deadline and nginx.poll() is None, "nginx did not start"
                time.sleep(0.05)
            yield port
        finally:
            terminate(nginx, 10)
            log.close()
            shutil.rmtree(sockets, ignore_errors=True)
