"""What `serve` writes: every process's lines through serve, whole and in order, whatever its
output is (a file opened with `>`, a pipe, a terminal), nothing after its last line; and a
warning for user code where nothing reads it."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from conftest import SERVE, wait_for_ping
from process_utils import free_port_range, terminate

REQUESTS = 5
ACCESS_LINE = re.compile(
    r'^127\.0\.0\.1 \[[0-9T:+-]+\] "POST /invocations HTTP/1\.1" 200 \d+ '
    r"request_id=[0-9a-f]{32} request_time=[0-9.]+ upstream_time=\S+$"
)
PASS_THROUGH = """
def handler(data, context):
    return data.read(), "application/json"
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """half_plus_three with its inference.py where the classic mistake puts it: in the model's
    own folder, where a single-model endpoint does not read it."""
    import example_models as em

    root = tmp_path_factory.mktemp("output_models")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    (root / "half_plus_three" / "code").mkdir()
    (root / "half_plus_three" / "code" / "inference.py").write_text(PASS_THROUGH)
    return root


@contextlib.contextmanager
def output_to(kind: str, tmp: Path) -> Iterator[tuple[int, Callable[[], bytes]]]:
    """(the fd serve writes to, a function giving what it wrote so far): a file opened as `>`
    opens it (truncated, not appending), a pipe, or a terminal (a pseudo-terminal)."""
    if kind == "file":
        path = tmp / "serve.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            yield fd, lambda: path.read_bytes()
        finally:
            os.close(fd)
        return
    read_fd, write_fd = pty.openpty() if kind == "terminal" else os.pipe()
    got = bytearray()

    def drain() -> None:
        with contextlib.suppress(OSError):  # a terminal's reader gets EIO once all closed it
            while chunk := os.read(read_fd, 65536):
                got.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield write_fd, lambda: bytes(got)
    finally:
        with contextlib.suppress(OSError):
            os.close(write_fd)
        reader.join(10)
        os.close(read_fd)


@pytest.mark.parametrize("kind", ["file", "pipe", "terminal"])
def test_every_line_arrives_whole_and_serve_writes_the_last(model_dir, tmp_path, kind):
    port, high = free_port_range(5)
    env = {
        **os.environ,
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
    }
    argv = [SERVE, "--model-dir", str(model_dir), "--run-dir", str(tmp_path / "run"),
            "--host", "127.0.0.1"]  # fmt: skip
    with output_to(kind, tmp_path) as (fd, written):
        # `serve > out 2>&1`: stdout and stderr one open file
        proc = subprocess.Popen(argv, env=env, stdout=fd, stderr=fd, stdin=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            assert wait_for_ping(url, lambda: proc.poll() is None, 180, 0.3), written()[-3000:]
            for _ in range(REQUESTS):
                reply = requests.post(f"{url}/invocations", data="[1.0, 2.0]", timeout=30)
                assert reply.json() == {"predictions": [[3.5, 4.0]]}
        finally:
            assert terminate(proc, 40) == 0
        text = written().decode().replace("\r\n", "\n")  # a terminal's line ends
    lines = text.splitlines()
    posts = [line for line in lines if '"POST /invocations' in line]
    assert len(posts) == REQUESTS, text[-5000:]
    assert all(ACCESS_LINE.match(line) for line in posts), posts
    pings = [line for line in lines if "GET /ping" in line]
    assert pings and all(line.startswith("127.0.0.1 [") for line in pings), pings[:5]
    assert re.search(r" INFO serve \[\d+\]: stopped$", lines[-1]), lines[-5:]
    # one line per event (CloudWatch makes an event of each line): no block, no blank line
    assert not [line for line in lines if not line.strip() or line[0] in " \t}"], text[:3000]


def test_user_code_where_nothing_reads_it_is_named_with_where_it_goes(model_dir, tmp_path):
    port, high = free_port_range(5)
    env = {
        **os.environ,
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
    }
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [SERVE, "--model-dir", str(model_dir), "--run-dir", str(tmp_path / "run"),
             "--host", "127.0.0.1"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            assert wait_for_ping(url, lambda: proc.poll() is None, 180, 0.3)
        finally:
            terminate(proc, 40)
    text = log_path.read_text()
    misplaced = model_dir / "half_plus_three" / "code"
    (warning,) = [line for line in text.splitlines() if "is not read" in line]
    assert " WARNING serve " in warning, warning
    assert f"{misplaced} is not read" in warning, warning
    assert f"{model_dir / 'code'}/" in warning, warning
    assert "handlers: built-in" in text  # as the warning says
