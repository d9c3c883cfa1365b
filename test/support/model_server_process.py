"""Start a model server process (ours or the real binary) and wait until its models serve.

Only the command line and the REST status API are used, so the same code drives
`tfs-model-server` and `tensorflow_model_server`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from process_utils import free_port, terminate


def default_executable() -> str:
    """tensorflow_model_server when it is on PATH, else ours (beside this interpreter)."""
    real = shutil.which("tensorflow_model_server")
    if real:
        return real
    ours = Path(sys.executable).parent / "tfs-model-server"
    return str(ours) if ours.exists() else (shutil.which("tfs-model-server") or str(ours))


def model_states(rest_url: str, model: str, timeout: float = 2.0) -> dict[str, str] | None:
    """{version: state} from GET /v1/models/<model>, or None when the server does not answer."""
    try:
        with urllib.request.urlopen(f"{rest_url}/v1/models/{model}", timeout=timeout) as reply:
            doc = json.loads(reply.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return {s["version"]: s["state"] for s in doc.get("model_version_status", [])}


@dataclass
class ModelServerProcess:
    """One model server child process with its ports and log file."""

    args: Sequence[str]
    log_path: Path
    rest_port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    executable: str = field(default_factory=default_executable)
    proc: subprocess.Popen | None = None

    @property
    def rest(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    @property
    def grpc_target(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def is_ours(self) -> bool:
        return Path(self.executable).name == "tfs-model-server"

    def command(self) -> list[str]:
        cmd = [self.executable, f"--port={self.grpc_port}", f"--rest_api_port={self.rest_port}"]
        if self.is_ours:
            cmd.append(f"--bind_address={self.host}")
        return [*cmd, *self.args]

    def start(self) -> ModelServerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, models: Sequence[str], timeout: float) -> bool:
        """True once every version of every model is AVAILABLE; False on exit or timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            states = [model_states(self.rest, m) for m in models]
            if all(s and all(v == "AVAILABLE" for v in s.values()) for s in states):
                return True
            time.sleep(0.2)
        return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after timeout; returns the exit code."""
        return None if self.proc is None else terminate(self.proc, timeout)
