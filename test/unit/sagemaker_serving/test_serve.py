"""sagemaker_serving.serve: its command line, run directory, the child environment and
the readiness probe of the Python service (a real HTTP server on a unix socket)."""

from __future__ import annotations

import http.server
import socketserver
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemaker_serving import serve
from sagemaker_serving.config.access import TOKEN_HEADER
from sagemaker_serving.config.settings import VARIABLES, Settings
from sagemaker_serving.launcher import run_directory


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


class _Ping(http.server.BaseHTTPRequestHandler):
    """GET /ping: 200 with the right token, else 403 (as the service answers)."""

    token = "secret"

    def do_GET(self) -> None:
        ok = self.path == "/ping" and self.headers.get(TOKEN_HEADER) == self.token
        self.send_response(200 if ok else 403)
        self.send_header("Content-Length", "0")
        self.end_headers()

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


def test_service_ready_needs_a_200_to_ping_with_the_token(service_socket: str):
    assert serve.service_ready(service_socket, "secret")
    assert not serve.service_ready(service_socket, "wrong")


def test_service_ready_is_false_while_nothing_listens(tmp_path: Path):
    assert not serve.service_ready(str(tmp_path / "not-yet.sock"), "secret")


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


def test_the_ready_file_lives_in_a_private_directory(tmp_path: Path):
    ready = serve.new_ready_file()
    try:
        assert not ready.exists()
        assert stat.S_IMODE(ready.parent.stat().st_mode) == 0o700
    finally:
        ready.parent.rmdir()


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
