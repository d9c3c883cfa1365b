"""sagemaker_serving.serve: its command line, run directory, the child environment and
the readiness probe of the Python service (a real HTTP server on a unix socket)."""

from __future__ import annotations

import http.server
import os
import socket
import socketserver
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemaker_serving import serve
from sagemaker_serving.config.model_discovery import discover_models
from sagemaker_serving.config.settings import VARIABLES, Settings
from sagemaker_serving.environments import requirements
from sagemaker_serving.errors import StartupError
from sagemaker_serving.launcher import run_directory
from sagemaker_serving.launcher.front_port import check_front_port
from sagemaker_serving.launcher.nginx_config import find_nginx
from sagemaker_serving.launcher.universal_code import download_universal_code
from sagemaker_serving.user_code.loading import load_handlers


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


class _Ping(http.server.BaseHTTPRequestHandler):
    """GET /ping: 200 once `ready`, else 503 with the service's JSON error."""

    ready = False

    def do_GET(self) -> None:
        body = b"" if self.ready else b'{"error": "Not ready: model m is loading"}'
        self.send_response(200 if self.ready else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:  # a unix socket has no client address
        return "unix"

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service_socket(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "gunicorn.sock")
    server = _UnixHTTPServer(path, _Ping)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()


def test_readiness_is_the_services_ping(service_socket: str, monkeypatch):
    assert serve.service_not_ready(service_socket) == "Not ready: model m is loading"
    monkeypatch.setattr(_Ping, "ready", True)
    assert serve.service_not_ready(service_socket) is None


def test_readiness_waits_while_nothing_listens(tmp_path: Path):
    assert serve.service_not_ready(str(tmp_path / "not-yet.sock")) is not None


def test_arguments_and_their_defaults():
    args = serve.parse_args([])
    assert (args.command, args.model_dir, args.run_dir, args.host) == (
        "serve",
        None,
        None,
        "0.0.0.0",
    )
    args = serve.parse_args(["serve", "--model-dir", "/m", "--run-dir", "/r", "--host", ""])
    assert (args.model_dir, args.run_dir, args.host) == (Path("/m"), Path("/r"), "")


def test_the_run_directory_is_new_unless_given(tmp_path: Path):
    given = run_directory.prepare(tmp_path / "a" / "run")
    assert given == (tmp_path / "a" / "run").resolve() and given.is_dir()
    assert stat.S_IMODE(given.stat().st_mode) == 0o700
    temporary = run_directory.prepare(None)
    try:
        assert temporary.name.startswith("sagemaker-serve-") and temporary != given
    finally:
        temporary.rmdir()


def test_children_get_the_openmp_threads(monkeypatch):
    monkeypatch.setenv("KEPT", "1")
    env = serve.child_environment(Settings.from_env({"OMP_NUM_THREADS": "3"}))
    assert env["OMP_NUM_THREADS"] == "3" and env["KEPT"] == "1"


def test_help_names_the_port_every_setting_and_the_docs(capsys):
    with pytest.raises(SystemExit) as done:
        serve.parse_args(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "port 8080\n(SAGEMAKER_BIND_TO_PORT)" in text
    for variable in VARIABLES:
        assert f"  {variable.name}  " in text, variable.name
    assert "docs/settings.md" in text and "docs/getting-started.md" in text


def test_a_bad_argument_is_one_line_first_not_the_usage_block(capsys):
    with pytest.raises(SystemExit) as exit_info:
        serve.parse_args(["--model-dir", "m", "--bogus"])
    assert exit_info.value.code == 2
    first, *rest = capsys.readouterr().err.splitlines()
    assert first == "serve: error: unrecognized arguments: --bogus"
    assert rest == ["(serve --help describes them all)"]


def _taken_port(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        check_front_port("127.0.0.1", other.getsockname()[1])


def _open_run_directory(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o700)
    (tmp_path / "run").chmod(0o777)
    run_directory.prepare(tmp_path / "run")


def _broken_inference_py(tmp_path: Path) -> None:
    (tmp_path / "inference.py").write_text("raise RuntimeError('broken')\n")
    load_handlers(tmp_path, module_name="broken_inference")


def _requirements_with_an_editable_install(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("-e .\n")  # an editable install
    requirements.read(tmp_path)


def _universal_code_out_of_reach(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # nothing listens once closed
    os.environ.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_MAX_ATTEMPTS="1")
    download_universal_code("code", "shared", tmp_path / "code")


STARTUP_REFUSALS = {
    "settings": lambda tmp: Settings.from_env({"SAGEMAKER_BIND_TO_PORT": "http"}),
    "model discovery": lambda tmp: discover_models(tmp / "absent"),
    "front port": _taken_port,
    "nginx setup": lambda tmp: find_nginx(tmp),
    "run directory": _open_run_directory,
    "user code": _broken_inference_py,
    "requirements": _requirements_with_an_editable_install,
    "universal code": _universal_code_out_of_reach,
}


@pytest.mark.parametrize("step", STARTUP_REFUSALS)
def test_every_start_up_refusal_is_the_one_error_serve_answers_with_exit_2(
    tmp_path, monkeypatch, step
):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS"):  # restored after the test
        monkeypatch.setenv(name, os.environ.get(name, ""))
    with pytest.raises(StartupError) as info:
        STARTUP_REFUSALS[step](tmp_path)
    assert str(info.value)  # serve's line: "cannot start: <message>"
