"""The model server command line, which binary to run, and how instances share the GPUs."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from sagemaker_serving.config.settings import Settings
from sagemaker_serving.errors import StartupError

log = logging.getLogger(__name__)


class ModelServerError(StartupError):
    """No model server to run, or SAGEMAKER_TFS_MODEL_SERVER_FLAGS names a flag it does not
    know or one serve sets itself."""


TFS_BINARY = "tensorflow_model_server"
OUR_BINARY = "tfs-model-server"
NVIDIA_SMI_TIMEOUT_SECONDS = 5
HELP_TIMEOUT_SECONDS = 60
# docker/loopback_guard.c, built into every image and by `make install`: preloaded into the model
# server, its wildcard binds go to the loopback (tensorflow_model_server has no flag for the
# address: gRPC 0.0.0.0, REST ::) and a connection from a process of another user is closed.
LOOPBACK_GUARD_LIBRARY = Path(sys.prefix) / "lib" / "loopback_guard.so"


def find_model_server() -> tuple[str, bool]:
    """(executable, ours): tensorflow_model_server when on PATH, else our tfs-model-server."""
    tfs = shutil.which(TFS_BINARY)
    if tfs is not None:
        return tfs, False
    beside_python = Path(sys.executable).parent / OUR_BINARY
    ours = str(beside_python) if beside_python.is_file() else shutil.which(OUR_BINARY)
    if ours is None:
        raise ModelServerError(f"neither {TFS_BINARY} nor {OUR_BINARY} was found")
    return ours, True


def model_server_command(
    executable: str,
    ours: bool,
    settings: Settings,
    *,
    grpc_port: int,
    rest_port: int,
    model_config_path: Path,
    batching_path: Path | None,
    monitoring_config_path: Path | None,
    gpu_memory_fraction: float | None,
) -> list[str]:
    """argv of one model server instance (`batching_path`: the batching parameters, when
    SAGEMAKER_TFS_ENABLE_BATCHING is on)."""
    argv = [
        executable,
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        f"--model_config_file={model_config_path}",
        "--max_num_load_retries=0",
        f"--rest_api_timeout_in_ms={settings.proxy_read_timeout_seconds * 1000}",
    ]
    if batching_path is not None:
        argv += ["--enable_batching=true", f"--batching_parameters_file={batching_path}"]
    if settings.intra_op_parallelism > 0:
        argv.append(f"--tensorflow_intra_op_parallelism={settings.intra_op_parallelism}")
    if settings.inter_op_parallelism > 0:
        argv.append(f"--tensorflow_inter_op_parallelism={settings.inter_op_parallelism}")
    if monitoring_config_path is not None:
        argv.append(f"--monitoring_config_file={monitoring_config_path}")
    if gpu_memory_fraction is not None:
        argv.append(f"--per_process_gpu_memory_fraction={gpu_memory_fraction}")
    if ours:
        argv.append("--bind_address=127.0.0.1")
    return argv + list(settings.model_server_flags)


# what serve sets itself: the ports, the files it writes, the address (loopback_guard's job)
SERVE_FLAGS = frozenset(
    {
        "port", "rest_api_port", "grpc_socket_path", "model_config_file", "model_name",
        "model_base_path", "enable_batching", "batching_parameters_file",
        "monitoring_config_file", "bind_address", "version",
    }
)  # fmt: skip
_HELP_FLAG = re.compile(r"^\s*--([a-z][a-z0-9_]*)[=\s]", re.MULTILINE)


def check_extra_flags(executable: str, extra: tuple[str, ...]) -> None:
    """Every flag of `extra` is one the model server's --help lists and not one of
    SERVE_FLAGS (ModelServerError says which is not)."""
    if not extra:
        return
    names = [flag[2:].split("=", 1)[0] for flag in extra]
    owned = sorted(set(names) & SERVE_FLAGS)
    if owned:
        raise ModelServerError(
            f"SAGEMAKER_TFS_MODEL_SERVER_FLAGS: serve sets --{', --'.join(owned)} itself"
        )
    try:
        shown = subprocess.run(
            [executable, "--help"], capture_output=True, text=True, timeout=HELP_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ModelServerError(f"{executable} --help failed: {exc}") from None
    known = set(_HELP_FLAG.findall(shown.stdout + shown.stderr))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ModelServerError(
            f"SAGEMAKER_TFS_MODEL_SERVER_FLAGS: --{', --'.join(unknown)} is not a flag of "
            f"{Path(executable).name} (its --help lists them)"
        )


CPU_DEVICE_TYPES = "CPU,XLA_CPU"


def model_server_environment(
    settings: Settings,
    env: Mapping[str, str],
    ours: bool,
    device: str | None,
    gpu_count: int,
    guard_library: Path = LOOPBACK_GUARD_LIBRARY,
) -> dict[str, str]:
    """The environment of one model server instance: its GPU (CUDA_VISIBLE_DEVICES); on a host
    without GPUs, TensorFlow's device factories limited to the CPU so that it does not probe
    CUDA (whose failed cuInit is an error line in every CPU host's log; a
    TF_ENABLED_DEVICE_TYPES of the user's own is kept); TensorFlow's CPU allocator
    (TF_ONEDNN_USE_SYSTEM_ALLOCATOR, settings.py); the loopback_guard library preloaded when
    it is installed (either model server: only serve's user reaches their ports)."""
    result = dict(env)
    if device is not None:
        result["CUDA_VISIBLE_DEVICES"] = device
    if settings.onednn_system_allocator is not None:
        allocator = "1" if settings.onednn_system_allocator else "0"
        result["TF_ONEDNN_USE_SYSTEM_ALLOCATOR"] = allocator
    if gpu_count <= 0:
        result.setdefault("TF_ENABLED_DEVICE_TYPES", CPU_DEVICE_TYPES)
    if guard_library.is_file():
        preload = result.get("LD_PRELOAD", "")
        result["LD_PRELOAD"] = f"{guard_library} {preload}".strip()
    return result


def gpu_assignment(
    instance_count: int, margin: float, gpu_count: int
) -> list[tuple[str | None, float | None]]:
    """(CUDA_VISIBLE_DEVICES, GPU memory fraction) per instance: instance i runs on GPU
    i % gpu_count; instances sharing a GPU split (1 - margin) of its memory."""
    if gpu_count <= 0:
        return [(None, None)] * instance_count
    sharing = [len(range(d, instance_count, gpu_count)) for d in range(gpu_count)]
    assignment: list[tuple[str | None, float | None]] = []
    for i in range(instance_count):
        device = i % gpu_count
        k = sharing[device]
        assignment.append((str(device), round((1 - margin) / k, 4) if k > 1 else None))
    return assignment


def count_gpus() -> int:
    """Number of GPUs `nvidia-smi -L` lists; 0 without nvidia-smi or when it fails."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return 0
    try:
        result = subprocess.run(
            [nvidia_smi, "-L"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_SECONDS,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("nvidia-smi -L failed, assuming no GPU: %s", exc)
        return 0
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
