"""What both walkthroughs share: a cached model, a SageMaker-style model directory, and the
whole container stack (`serve`: nginx + Python handler service + model server) on loopback.

Not an example itself; `run.py` in each example folder imports it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from process_utils import free_port_range, terminate

REPO = Path(__file__).resolve().parent.parent
# Models, inputs, model directories and outputs of the examples; run/ is git-ignored.
CACHE = Path(os.environ.get("EXAMPLES_WORK_DIR") or REPO / "run" / "examples")
BIN = Path(sys.executable).parent  # the venv's bin: serve, tfs-model-server
MODEL_VERSION = 1
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up chatter


def cached_model(name: str, rebuild: bool = False) -> Path:
    """Base path of example model `name` (`run/examples/models/<name>/1/`), built if missing."""
    import example_models

    base = CACHE / "models" / name
    if rebuild and base.exists():
        shutil.rmtree(base)
    if not (base / str(MODEL_VERSION)).is_dir():
        print(f"building the {name} model in {base} (once; later runs reuse it) ...", flush=True)
        started = time.monotonic()
        example_models.ensure_built(name, base, MODEL_VERSION)
        print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    return base


def assemble_model_dir(dest: Path, model_name: str, model_base: Path, code_dir: Path) -> Path:
    """Lay out `dest` as SageMaker unpacks model.tar.gz into /opt/ml/model:

        dest/<model_name>/<version>/saved_model.pb, variables/ ...
        dest/code/inference.py

    The SavedModel is hard-linked from the cache (copied where links fail); the code is copied
    fresh, so edits to the example's code/ apply on the next run.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(model_base, dest / model_name, copy_function=link)
    shutil.copytree(code_dir, dest / "code", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def local_endpoint(model_dir: Path, port: int, timeout: float = 240) -> Iterator[str]:
    """`serve` on 127.0.0.1:`port` (0: any free port) for the duration of the block; yields its
    URL once GET /ping answers 200. Always stopped with SIGTERM; its log is printed on failure."""
    if port == 0:
        port = free_port_range(1)[0]
    elif not port_is_free(port):
        raise SystemExit(f"port {port} is in use; pass --port N (or --port 0 for any free port)")
    instances = int(os.environ.get("SAGEMAKER_TFS_INSTANCE_COUNT", "1"))
    low, high = free_port_range(2 * instances + 2)
    while low <= port <= high:
        low, high = free_port_range(2 * instances + 2)
    env = {
        **os.environ,
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_SAFE_PORT_RANGE": f"{low}-{high}",
    }
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="sagemaker-example-") as tmp:
        log_path = Path(tmp) / "serve.log"
        command = [
            str(BIN / "serve"),
            "--model-dir",
            str(model_dir),
            "--run-dir",
            str(Path(tmp) / "run"),
            "--host",
            "127.0.0.1",
        ]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        ok = False
        try:
            print(f"starting the container stack on {url} (model dir {model_dir}) ...", flush=True)
            _wait_healthy(url, proc, timeout)
            yield url
            ok = True
        finally:
            terminate(proc, 40)
            if not ok:
                _print_log_tail(log_path)


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with status {proc.returncode} before it was healthy")
        try:
            if requests.get(f"{url}/ping", timeout=2).status_code == 200:
                print(f"healthy after {time.monotonic() - started:.1f} s", flush=True)
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"GET {url}/ping did not answer 200 within {timeout:.0f} s")


def _print_log_tail(log_path: Path, lines: int = 60) -> None:
    if not log_path.exists():
        return
    text = log_path.read_text(errors="replace").splitlines()
    text = [line for line in text if '"GET /ping ' not in line]
    print(f"--- last {lines} lines of the serve log ---", file=sys.stderr)
    print("\n".join(text[-lines:]), file=sys.stderr)
