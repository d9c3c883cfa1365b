"""serve refuses to start, with a message that says why, and exits non-zero."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import SERVE, free_port_range, run_serve
from process_utils import terminate


@pytest.fixture(scope="module")
def good_models(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("good")
    em.half_plus_two_tf1(root / "half_plus_two")
    return root


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SAGEMAKER_TFS_ENABLE_BATCHING": "yes"}, "SAGEMAKER_TFS_ENABLE_BATCHING"),
        ({"SAGEMAKER_TFS_INSTANCE_COUNT": "0"}, "SAGEMAKER_TFS_INSTANCE_COUNT"),
        ({"SAGEMAKER_BIND_TO_PORT": "http"}, "SAGEMAKER_BIND_TO_PORT"),
        ({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "missing"}, "missing"),
    ],
)
def test_invalid_settings_name_the_variable(good_models, tmp_path, env, variable):
    result = run_serve(good_models, tmp_path, env, timeout=60)
    assert result.returncode == 2
    assert "cannot start" in result.stderr and variable in result.stderr


def test_no_model_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_serve(tmp_path / "empty", tmp_path, {}, timeout=60)
    assert result.returncode == 2
    assert "SavedModel" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_a_run_directory_another_user_made_first_is_refused(good_models, tmp_path):
    """In a world-writable parent such as /tmp, another user made the run directory before
    serve started (to plant an environment serve would run): exit 2, saying why."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "run").mkdir()
    os.chown(shared / "run", 65534, 65534)
    result = run_serve(good_models, shared, {}, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1 and "belongs to uid 65534" in lines[0], result.stderr
    assert not any((shared / "run").iterdir())  # nothing written into it


def test_a_model_server_that_cannot_load_its_model_stops_serve(tmp_path):
    broken = tmp_path / "models" / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"this is not a SavedModel")
    result = run_serve(tmp_path / "models", tmp_path, {"SAGEMAKER_TFS_WAIT_TIME_SECONDS": "60"})
    assert result.returncode == 1
    assert re.search(r"model-server-0 exited with code [1-9]\d* during start-up", result.stderr)
    # the reason is the last line, with the model server's own last words (operations.md)
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert re.search(r"cannot start: model-server-0 exited with code [1-9]\d*: .+", last), last
    assert "saved_model.pb" in last, last


def test_a_start_past_its_wait_time_says_so_on_the_last_line(good_models, tmp_path):
    """SAGEMAKER_TFS_WAIT_TIME_SECONDS passed (an inference.py slow to import): exit 1, the
    reason on the last line."""
    models = tmp_path / "models"
    shutil.copytree(good_models, models)
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text("import time\n\ntime.sleep(60)\n")
    result = run_serve(models, tmp_path, {"SAGEMAKER_TFS_WAIT_TIME_SECONDS": "2"})
    assert result.returncode == 1
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert "cannot start: not ready after SAGEMAKER_TFS_WAIT_TIME_SECONDS=2" in last, last


PAUSE_IMPORT = """
import os, sys, time

class Pause:  # serve (PID 1) pauses in its imports, once, saying so in a file
    def find_spec(self, name, path=None, target=None):
        if name == "sagemaker_serving.config.model_discovery" and os.getpid() == 1:
            if not os.path.exists(MARKER):
                open(MARKER, "w").close()
                time.sleep(3)
        return None

sys.meta_path.insert(0, Pause())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs a PID namespace (root)"
)
def test_a_sigterm_while_serve_imports_stops_it_as_pid_1(good_models, tmp_path):
    """As PID 1 (the image's entry point) a signal without a handler is dropped: a SIGTERM
    sent while serve still imports its modules (SageMaker's, right after `docker run`) stops
    it all the same, at once, instead of being lost until the SIGKILL 30 s later."""
    import psutil

    hook = tmp_path / "hook"
    hook.mkdir()
    marker = tmp_path / "importing"
    (hook / "sitecustomize.py").write_text(f"MARKER = {str(marker)!r}\n{PAUSE_IMPORT}")
    port, high = free_port_range(5)
    env = {
        **os.environ,
        "PYTHONPATH": str(hook),
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
    }
    command = [SERVE, "--model-dir", str(good_models), "--host", "127.0.0.1"]
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert unshare.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        (serve,) = psutil.Process(unshare.pid).children()
        serve.send_signal(signal.SIGTERM)
        output, _ = unshare.communicate(timeout=20)
    finally:
        unshare.kill()  # and with it serve (--kill-child), should the signal have been lost
        unshare.wait()
    assert unshare.returncode == 0, output
    assert "stopped during start-up (SIGTERM)" in output and "starting" not in output, output


def test_batching_settings_reach_the_model_server(good_models, tmp_path):
    import requests

    from conftest import serve_stack

    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", "SAGEMAKER_TFS_MAX_BATCH_SIZE": "4"}
    with serve_stack(good_models, tmp_path, env) as server:
        config = (server.run_dir / "batching-config.cfg").read_text()
        assert "max_batch_size { value: 4 }" in config
        reply = requests.post(f"{server.url}/invocations", data="[1.0, 2.0]", timeout=30)
        assert reply.json() == {"predictions": [[2.5, 3.0]]}
        # more rows than max_batch_size: TF Serving's batching answers 400, as a JSON body
        body = '{"instances": [1.0, 2.0, 3.0, 4.0, 5.0]}'
        reply = requests.post(f"{server.url}/invocations", data=body, timeout=30)
        assert reply.status_code == 400 and "batch" in reply.json()["error"].lower()


# ----- the front port, and what a refused start leaves behind ---------------------------------


@pytest.fixture
def tmpdir_env():
    """A short TMPDIR of its own (a unix socket's path must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="t-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_serve(model_dir: Path, tmpdir: Path, env: dict[str, str], port: int) -> subprocess.Popen:
    """serve on `port` without --run-dir (its directories under TMPDIR=tmpdir), its stdout
    and stderr one pipe."""
    low, high = free_port_range(4)
    settings = {
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}",
        "TMPDIR": str(tmpdir),
        **env,
    }
    return subprocess.Popen(
        [SERVE, "--model-dir", str(model_dir), "--host", "127.0.0.1"],
        env={**os.environ, **settings},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def output_until_exit(proc: subprocess.Popen, timeout: float, stop_at: str) -> tuple[str, bool]:
    """serve's output, and whether it exited by itself within `timeout` s; should it print
    `stop_at` first, or outlive the deadline, it is stopped at once."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if stop_at in line:
                seen.set()
        seen.set()  # the end of its output

    threading.Thread(target=read, daemon=True).start()
    seen.wait(timeout)
    if stop_at not in "".join(lines):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    exited = proc.poll() is not None
    terminate(proc, 40)
    return "".join(lines), exited


@pytest.fixture
def held_port():
    """A port something else listens on (as another serve, or any program, would)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_port_in_use_stops_serve_at_once_naming_it(good_models, tmpdir_env, held_port):
    proc = start_serve(good_models, tmpdir_env, {}, held_port)
    output, exited = output_until_exit(proc, 60, "ready:")
    assert exited and proc.returncode == 2, output[-3000:]
    assert f"port {held_port}" in output and "SAGEMAKER_BIND_TO_PORT" in output, output
    assert "ready" not in output
    assert "starting" not in output  # nothing was started: no model server, no nginx
    assert list(tmpdir_env.iterdir()) == []


FAKE_NGINX = """#!/bin/sh
# the real nginx for `-t`; otherwise a process that never listens
for arg in "$@"; do [ "$arg" = "-t" ] && %s; done
exec sleep 600
"""


def fake_nginx(tmp: Path, config_test: str) -> dict[str, str]:
    """PATH with an `nginx` first whose config test runs `config_test`, and that otherwise
    never listens."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "nginx").write_text(FAKE_NGINX % config_test)
    (bin_dir / "nginx").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_ready_is_never_said_before_nginx_listens(good_models, tmp_path, tmpdir_env):
    real = shutil.which("nginx") or "/usr/sbin/nginx"
    env = {**fake_nginx(tmp_path, f'exec {real} "$@"'), "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "30"}
    port, _ = free_port_range(1)
    proc = start_serve(good_models, tmpdir_env, env, port)
    output, exited = output_until_exit(proc, 150, "ready:")
    assert "ready:" not in output, output[-3000:]
    assert exited, output[-3000:]
    assert f"nginx is not listening on port {port}" in output, output[-3000:]
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize("reason", ["no_model", "port_in_use", "nginx_rejects_its_config"])
def test_a_refused_start_leaves_no_directory(good_models, tmp_path, tmpdir_env, held_port, reason):
    model_dir, env, port = good_models, {}, free_port_range(1)[0]
    if reason == "no_model":
        model_dir = tmp_path / "empty"
        model_dir.mkdir()
    elif reason == "port_in_use":
        port = held_port
    else:
        env = fake_nginx(tmp_path, "exit 1")
    output, exited = output_until_exit(start_serve(model_dir, tmpdir_env, env, port), 60, "ready:")
    assert exited and "cannot start" in output, output[-3000:]
    assert list(tmpdir_env.iterdir()) == []
