"""The cheapest front end of each kind, for the ceilings in the performance report.

- plain_proxy: nginx (the binary serve uses, as many workers) proxying every POST to the model
  server's REST predict URL with upstream keep-alive and nothing else: no njs, no logs, no header
  rules. No nginx front door can answer faster on the same machine.
- minimal_service: minimal_service_app.py (gunicorn + falcon forwarding the body to the model
  server) under gunicorn with the Python service's worker class and workers, reached
  directly (no nginx in front, so one hop fewer than the real stack). No gunicorn + falcon
  service that makes the same hop can answer faster.

Both listen on loopback on free ports and stop when their block ends.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from process_utils.ports import free_port
from sagemaker_serving.config.settings import Settings
from sagemaker_serving.launcher.nginx_config import find_nginx
from sagemaker_serving.service.event_loop_worker import WORKER_CLASS

HERE = Path(__file__).resolve().parent

PLAIN_PROXY_CONF = """
daemon off;
{user}
worker_processes {workers};
pid {run}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    client_max_body_size 100m;
    client_body_buffer_size 100m;
    keepalive_requests 100000;
    upstream model_server {{
        server 127.0.0.1:{rest_port};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://model_server{path};
        }}
    }}
}}
"""


def _wait_ready(url: str, body: bytes, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(url, data=body, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:  # refused, reset, or an HTTP error status
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer 200 within {timeout} s")


@contextlib.contextmanager
def _running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@contextlib.contextmanager
def plain_proxy(rest_port: int, path: str, body: bytes, work: Path) -> Iterator[str]:
    """nginx proxying POST / to http://127.0.0.1:<rest_port><path>; yields its URL."""
    run = work / "plain-proxy"
    run.mkdir(parents=True)
    port = free_port()
    user = f"user {pwd.getpwuid(os.getuid()).pw_name};" if os.getuid() == 0 else ""
    conf = PLAIN_PROXY_CONF.format(
        user=user,
        workers=Settings.from_env({}).nginx_worker_processes,
        run=run,
        rest_port=rest_port,
        port=port,
        path=path,
    )
    (run / "nginx.conf").write_text(conf)
    command = [find_nginx().binary, "-e", "stderr", "-p", str(run), "-c", str(run / "nginx.conf")]
    url = f"http://127.0.0.1:{port}/"
    with _running(command, dict(os.environ), run / "nginx.log") as proc:
        _wait_ready(url, body, proc)
        yield url


@contextlib.contextmanager
def minimal_service(
    rest_port: int, path: str, body: bytes, work: Path, *, wrap_b64: bool = False
) -> Iterator[str]:
    """minimal_service_app.py under gunicorn as the Python service runs; yields its URL."""
    settings = Settings.from_env({})
    port = free_port()
    env = {
        **os.environ,
        "MINIMAL_MODEL_SERVER_PORT": str(rest_port),
        "MINIMAL_PREDICT_PATH": path,
        "MINIMAL_WRAP_B64": "1" if wrap_b64 else "0",
    }
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        f"--chdir={HERE}",
        f"--bind=127.0.0.1:{port}",
        f"--workers={settings.gunicorn_workers}",
        f"--worker-class={WORKER_CLASS}",
        "--keep-alive=75",
        "--log-level=warning",
        "minimal_service_app:app",
    ]
    url = f"http://127.0.0.1:{port}/invocations"
    log = work / f"minimal-service-{port}.log"
    with _running(command, env, log) as proc:
        _wait_ready(url, body, proc)
        yield url
