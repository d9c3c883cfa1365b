"""cli.tf_noise: TensorFlow's native start-up lines stay out of the output on a host without a
GPU, and nothing else does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfs_model_server.cli import tf_noise

# what a user sees today without it (this machine and others: AMD/Intel, with CUDA libraries)
NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795847931.444232   26717 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "E0000 00:00:1795847127.358757   24077 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1732000000.000000   1 port.cc:153] oneDNN custom operations are on. You may see "
    "slightly different numerical results due to floating-point round-off errors.",
)
CHILD = """
import os, sys
from tfs_model_server.cli.tf_noise import quiet_cpu_start
print("before", file=sys.stderr, flush=True)
with quiet_cpu_start(gpu={gpu}):
    for line in {lines!r}:
        os.write(2, (line + "\\n").encode())  # as C++ writes: straight to file descriptor 2
print("after", os.environ.get("TF_ENABLED_DEVICE_TYPES"), file=sys.stderr, flush=True)
"""


def run_child(gpu: bool, lines: list[str], env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("TF_ENABLED_DEVICE_TYPES",
                                                           "TF_CPP_MIN_LOG_LEVEL")}  # fmt: skip
    code = CHILD.format(gpu=gpu, lines=lines)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_native_noise_is_dropped_on_a_cpu_host_and_the_rest_kept_in_order():
    real = "E0000 00:00:1.0 loader.cc:1] a real error"
    out = run_child(False, [NOISE[0], "kept one", *NOISE[1:], real])
    assert out.splitlines() == ["before", "kept one", real, "after CPU,XLA_CPU"]


def test_nothing_is_dropped_with_a_gpu_or_when_everything_is_asked_for():
    assert run_child(True, list(NOISE)).splitlines() == ["before", *NOISE, "after None"]
    everything = run_child(False, list(NOISE), {"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert everything.splitlines() == ["before", *NOISE, "after None"]


def test_a_gpu_is_an_nvidia_device_node(tmp_path):
    assert not tf_noise.has_gpu(tmp_path)
    (tmp_path / "nvidiactl").touch()
    assert not tf_noise.has_gpu(tmp_path)  # the driver's control node alone: no GPU
    (tmp_path / "nvidia0").touch()
    assert tf_noise.has_gpu(tmp_path)


def test_version_on_this_host_prints_the_versions_and_nothing_else():
    """What `tfs-model-server --version` shows a user (no TF_CPP_MIN_LOG_LEVEL of theirs)."""
    if tf_noise.has_gpu():
        pytest.skip("a host with a GPU keeps TensorFlow's lines")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",
                                                          "TF_ENABLED_DEVICE_TYPES")}  # fmt: skip
    command = [str(Path(sys.executable).parent / "tfs-model-server"), "--version"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0
    assert done.stdout.startswith("TensorFlow ModelServer: tfs-model-server ")
    assert done.stderr == ""
