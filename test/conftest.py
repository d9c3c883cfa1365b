"""Shared test helpers: model server processes on free loopback ports that always stop."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tfs_model_server.process import ModelServerProcess

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
OUR_SERVER = str(VENV_BIN / "tfs-model-server")


def start_model_server(
    args: Sequence[str], log_path: Path, ready_model: str | None = None, timeout: float = 120
) -> ModelServerProcess:
    """Start our tfs-model-server; wait until ready_model is AVAILABLE (or the process exits)."""
    server = ModelServerProcess(list(args), log_path, executable=OUR_SERVER).start()
    if ready_model is None:
        return server
    if not server.wait_ready([ready_model], timeout) and server.alive():
        server.stop()
        raise TimeoutError(f"model server not ready in {timeout}s:\n{server.log()[-3000:]}")
    return server


@contextlib.contextmanager
def model_server(
    args: Sequence[str], log_path: Path, ready_model: str | None = None
) -> Iterator[ModelServerProcess]:
    """A running model server for the duration of the block; it fails loudly if it died."""
    server = start_model_server(args, log_path, ready_model)
    try:
        if not server.alive():
            raise RuntimeError(f"model server exited {server.proc.returncode}:\n{server.log()}")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def model_root(tmp_path_factory) -> Path:
    """Real SavedModels built once per session with example_models."""
    import example_models as em

    root = tmp_path_factory.mktemp("models")
    em.half_plus_two_tf1(root / "half_plus_two")
    em.half_plus_three_tf1(root / "half_plus_three")
    em.half_plus_two_tf2(root / "half_plus_two_tf2")
    em.multi_io(root / "multi_io")
    em.string_input(root / "string_input")
    em.keras_export(root / "keras")
    em.variable_length(root / "variable_length")
    return root
