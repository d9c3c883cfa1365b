"""serve's relay of nginx's request log with a real nginx: every request counted once, also
across the reloads that replace the file where holes cannot be punched."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from process_utils.ports import free_port
from sagemaker_serving.launcher import front_log_relay
from sagemaker_serving.launcher.front_log_relay import FrontLogRelay, new_log, nginx_access_log
from sagemaker_serving.launcher.nginx_config import find_nginx
from sagemaker_serving.service.front_metrics import REPORT_BYTES, split_report

TOKEN = "run-secret"
CONF = """
daemon off;
worker_processes 2;
worker_shutdown_timeout 1s;  # within the relay's 1.5 s
pid {run}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    log_format sagemaker_metrics '/ping $status - $request_time';
{access_log}
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 'ok'; }}
    }}
}}
"""


class Receiver:
    """The service's end of the reports, counting lines on a thread."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.lines = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                secret, lines = split_report(self.sock.recv(REPORT_BYTES))
            except OSError:
                return
            assert secret == TOKEN.encode()
            self.lines += len(lines)


def get(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/ping", headers={"Connection": "close"})
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()


def test_every_request_is_counted_across_replaced_files(tmp_path, monkeypatch):
    monkeypatch.setattr(front_log_relay, "punch_hole", lambda *_: False)
    monkeypatch.setattr(front_log_relay, "FREE_BYTES", 0)  # tried at the first read
    monkeypatch.setattr(front_log_relay, "ROTATE_BYTES", 16 * 1024)  # about 800 lines
    port = free_port()
    log = new_log(tmp_path / "front-requests.log")
    conf = tmp_path / "nginx.conf"
    # nginx's workers write through the descriptor they inherit from its master
    conf.write_text(CONF.format(run=tmp_path, port=port, access_log=nginx_access_log(log)))
    nginx = subprocess.Popen(
        [find_nginx().binary, "-e", "stderr", "-p", str(tmp_path), "-c", str(conf)]
    )
    receiver = Receiver()
    reloads = []

    def reload() -> None:
        reloads.append(time.monotonic())
        nginx.send_signal(signal.SIGHUP)

    relay = FrontLogRelay(log, receiver.sock.getsockname()[1], TOKEN, reload, 1.5).start()
    try:
        deadline = time.monotonic() + 10
        while get(port) != 200:
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.05)
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda _: get(port), range(12_000)))
    finally:
        nginx.send_signal(signal.SIGQUIT)  # old and new workers flush their buffers
        nginx.wait(20)
        relay.stop()
    answered = 1 + statuses.count(200)  # with the first that nginx answered
    deadline = time.monotonic() + 10
    while receiver.lines < answered and time.monotonic() < deadline:
        time.sleep(0.05)
    receiver.sock.close()
    assert statuses.count(200) == len(statuses)  # a reload loses no request
    assert len(reloads) >= 2
    assert receiver.lines == answered
