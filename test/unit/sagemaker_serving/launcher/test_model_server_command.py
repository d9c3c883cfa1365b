"""Tests for sagemaker_serving.launcher.model_server_command: binary choice, argv, GPU sharing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sagemaker_serving.config.settings import Settings
from sagemaker_serving.errors import StartupError
from sagemaker_serving.launcher import model_server_command as msc
from sagemaker_serving.launcher.model_server_command import (
    count_gpus,
    find_model_server,
    gpu_assignment,
    model_server_command,
    model_server_environment,
)

NO_GUARD = Path("/nonexistent/loopback_guard.so")  # environments without the preload


def settings(**env: str) -> Settings:
    return Settings.from_env(env, cpu_count=2)


def executable(path: Path, script: str = "exit 0") -> Path:
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_which(found: dict[str, str]):
    return lambda name: found.get(name)


# find_model_server


def test_prefers_tensorflow_model_server(monkeypatch):
    monkeypatch.setattr(
        msc.shutil,
        "which",
        fake_which({"tensorflow_model_server": "/usr/bin/tensorflow_model_server"}),
    )
    assert find_model_server() == ("/usr/bin/tensorflow_model_server", False)


def test_ours_next_to_python(monkeypatch, tmp_path):
    ours = executable(tmp_path / "tfs-model-server")
    monkeypatch.setattr(msc.shutil, "which", fake_which({"tfs-model-server": "/elsewhere"}))
    monkeypatch.setattr(msc.sys, "executable", str(tmp_path / "python"))
    assert find_model_server() == (str(ours), True)


def test_ours_on_path(monkeypatch, tmp_path):
    monkeypatch.setattr(
        msc.shutil, "which", fake_which({"tfs-model-server": "/bin/tfs-model-server"})
    )
    monkeypatch.setattr(msc.sys, "executable", str(tmp_path / "python"))
    assert find_model_server() == ("/bin/tfs-model-server", True)


def test_no_model_server(monkeypatch, tmp_path):
    monkeypatch.setattr(msc.shutil, "which", fake_which({}))
    monkeypatch.setattr(msc.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(StartupError, match="tensorflow_model_server"):
        find_model_server()


def test_finds_our_server_in_this_venv():
    path, ours = find_model_server()
    assert Path(path).name in ("tfs-model-server", "tensorflow_model_server")
    assert ours == (Path(path).name == "tfs-model-server")


# model_server_command


def command(s: Settings, ours: bool = False, **kwargs) -> list[str]:
    options = {
        "grpc_port": 9000,
        "rest_port": 8501,
        "model_config_path": Path("/run/model-config.cfg"),
        "batching_path": None,
        "monitoring_config_path": None,
        "gpu_memory_fraction": None,
    }
    options.update(kwargs)
    return model_server_command("/bin/tms", ours, s, **options)


def test_environment_keeps_the_base_and_adds_gpu_and_allocator():
    base = {"PATH": "/bin", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0"}
    assert model_server_environment(settings(), base, True, None, 1, NO_GUARD) == base
    multi = settings(SAGEMAKER_MULTI_MODEL="true")
    env = model_server_environment(multi, {"PATH": "/bin"}, True, "1", 2, NO_GUARD)
    assert env == {
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "1",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
    }
    pool = settings(SAGEMAKER_MULTI_MODEL="true", TF_ONEDNN_USE_SYSTEM_ALLOCATOR="false")
    assert model_server_environment(pool, {}, True, None, 1, NO_GUARD) == {
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0"
    }


def test_minimal_command():
    assert command(settings()) == [
        "/bin/tms",
        "--port=9000",
        "--rest_api_port=8501",
        "--model_config_file=/run/model-config.cfg",
        "--max_num_load_retries=0",
        "--rest_api_timeout_in_ms=60000",
    ]


FULL_ARGV = [
    "/bin/tms",
    "--port=10000",
    "--rest_api_port=10001",
    "--model_config_file=/run/model-config.cfg",
    "--max_num_load_retries=0",
    "--rest_api_timeout_in_ms=90000",
    "--enable_batching=true",
    "--batching_parameters_file=/run/batching.cfg",
    "--tensorflow_intra_op_parallelism=4",
    "--tensorflow_inter_op_parallelism=2",
    "--monitoring_config_file=/run/monitoring.cfg",
    "--per_process_gpu_memory_fraction=0.4",
]


def full_command(ours: bool) -> list[str]:
    s = settings(
        SAGEMAKER_TFS_ENABLE_BATCHING="true",
        SAGEMAKER_TFS_INTRA_OP_PARALLELISM="4",
        SAGEMAKER_TFS_INTER_OP_PARALLELISM="2",
        SAGEMAKER_GUNICORN_TIMEOUT_SECONDS="90",
    )
    return command(
        s,
        ours=ours,
        grpc_port=10000,
        rest_port=10001,
        batching_path=Path("/run/batching.cfg"),
        monitoring_config_path=Path("/run/monitoring.cfg"),
        gpu_memory_fraction=0.4,
    )


def test_full_command_for_our_server():
    assert full_command(ours=True) == [*FULL_ARGV, "--bind_address=127.0.0.1"]


def test_bind_address_only_for_our_server():
    assert "--bind_address=127.0.0.1" in command(settings(), ours=True)
    assert not any(a.startswith("--bind_address") for a in command(settings(), ours=False))


# Every flag tensorflow_model_server defines (tensorflow_serving/model_servers/main.cc): it exits
# on any other, so serve must pass none of ours (--bind_address) to it.
TFS_FLAGS = {
    "allow_version_labels_for_unavailable_models",
    "batching_parameters_file",
    "enable_batching",
    "enable_grpc_healthcheck_service",
    "enable_model_warmup",
    "enable_per_model_batching_parameters",
    "enable_profiler",
    "enable_serialization_as_tensor_content",
    "enable_signature_method_name_check",
    "file_system_poll_wait_seconds",
    "flush_filesystem_caches",
    "grpc_channel_arguments",
    "grpc_max_threads",
    "grpc_socket_path",
    "load_retry_interval_micros",
    "max_num_load_retries",
    "mixed_precision",
    "model_base_path",
    "model_config_file",
    "model_config_file_poll_wait_seconds",
    "model_name",
    "monitoring_config_file",
    "num_load_threads",
    "num_request_iterations_for_warmup",
    "num_tflite_interpreters_per_pool",
    "num_tflite_pools",
    "num_unload_threads",
    "per_process_gpu_memory_fraction",
    "platform_config_file",
    "port",
    "prefer_tflite_model",
    "remove_unused_fields_from_bundle_metagraph",
    "rest_api_enable_cors_support",
    "rest_api_num_threads",
    "rest_api_port",
    "rest_api_timeout_in_ms",
    "saved_model_tags",
    "skip_initialize_tpu",
    "ssl_config_file",
    "tensorflow_inter_op_parallelism",
    "tensorflow_intra_op_parallelism",
    "tensorflow_session_config_file",
    "tensorflow_session_parallelism",
    "thread_pool_factory_config_file",
    "use_alts_credentials",
    "version",
    "xla_cpu_compilation_enabled",
    "xla_gpu_compilation_enabled",
}


def test_full_command_for_the_real_binary():
    argv = full_command(ours=False)
    assert argv == FULL_ARGV
    names = {a[2:].split("=", 1)[0] for a in argv[1:]}
    assert names <= TFS_FLAGS, names - TFS_FLAGS


# model_server_environment


@pytest.mark.parametrize("ours", [True, False], ids=["ours", "tensorflow_model_server"])
def test_either_model_server_gets_the_guard_library(tmp_path, ours):
    library = tmp_path / "loopback_guard.so"
    library.write_bytes(b"")
    env = model_server_environment(settings(), {"LD_PRELOAD": "/x.so"}, ours, None, 1, library)
    assert env["LD_PRELOAD"] == f"{library} /x.so"
    assert model_server_environment(settings(), {}, ours, None, 1, library)["LD_PRELOAD"] == str(
        library
    )
    # without the library there is nothing to preload (serve says so: see serve.py)
    assert "LD_PRELOAD" not in model_server_environment(
        settings(), {}, ours, None, 1, tmp_path / "none"
    )


def test_the_images_install_the_guard_library_where_serve_looks():
    # /opt/venv is the images' venv (sys.prefix); see docker/Dockerfile (every target)
    assert Path(msc.LOOPBACK_GUARD_LIBRARY).relative_to(msc.sys.prefix) == Path(
        "lib/loopback_guard.so"
    )


def test_without_gpus_tensorflow_does_not_probe_cuda():
    env = model_server_environment(settings(), {"A": "1"}, True, None, 0, NO_GUARD)
    assert env == {"A": "1", "TF_ENABLED_DEVICE_TYPES": "CPU,XLA_CPU"}
    mine = {"TF_ENABLED_DEVICE_TYPES": "CPU,GPU"}
    assert model_server_environment(settings(), mine, True, None, 0, NO_GUARD) == mine


def test_with_gpus_each_instance_gets_its_device():
    env = model_server_environment(settings(), {}, False, "1", 2, NO_GUARD)
    assert env == {"CUDA_VISIBLE_DEVICES": "1"}


def test_our_server_accepts_the_command(tmp_path):
    from tfs_model_server.cli import flags

    s = settings(
        SAGEMAKER_TFS_ENABLE_BATCHING="true",
        SAGEMAKER_TFS_INTRA_OP_PARALLELISM="1",
        SAGEMAKER_TFS_INTER_OP_PARALLELISM="1",
    )
    argv = command(
        s,
        ours=True,
        batching_path=tmp_path / "b.cfg",
        monitoring_config_path=tmp_path / "m.cfg",
        gpu_memory_fraction=0.25,
    )
    options = flags.parse(argv[1:])
    assert options.port == 9000
    assert options.rest_api_port == 8501
    assert options.rest_api_timeout_in_ms == 60000
    assert options.max_num_load_retries == 0
    assert options.enable_batching is True
    assert options.bind_address == "127.0.0.1"


# gpu_assignment


@pytest.mark.parametrize(
    ("instances", "margin", "gpus", "expected"),
    [
        (1, 0.2, 0, [(None, None)]),
        (3, 0.2, 0, [(None, None)] * 3),
        (1, 0.2, 1, [("0", None)]),
        (2, 0.2, 1, [("0", 0.4), ("0", 0.4)]),
        (3, 0.1, 1, [("0", 0.3), ("0", 0.3), ("0", 0.3)]),
        (2, 0.2, 2, [("0", None), ("1", None)]),
        (3, 0.2, 2, [("0", 0.4), ("1", None), ("0", 0.4)]),
        (1, 0.2, 4, [("0", None)]),
        (3, 0.0, 1, [("0", 0.3333)] * 3),
    ],
)
def test_gpu_assignment(instances, margin, gpus, expected):
    assert gpu_assignment(instances, margin, gpus) == expected


def test_gpu_fractions_never_oversubscribe():
    for instances in range(1, 20):
        for gpus in range(1, 6):
            assignment = gpu_assignment(instances, 0.2, gpus)
            for device in {d for d, _ in assignment}:
                shares = [f if f is not None else 1.0 for d, f in assignment if d == device]
                assert sum(shares) <= 1.0


# count_gpus


def test_count_gpus_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(msc.shutil, "which", fake_which({}))
    assert count_gpus() == 0


def test_count_gpus_parses_listing(monkeypatch, tmp_path):
    smi = executable(
        tmp_path / "nvidia-smi",
        'echo "GPU 0: Tesla T4 (UUID: GPU-a)"\n'
        'echo "  MIG 1g.5gb Device 0: (UUID: MIG-b)"\n'
        'echo "GPU 1: Tesla T4 (UUID: GPU-c)"',
    )
    monkeypatch.setattr(msc.shutil, "which", fake_which({"nvidia-smi": str(smi)}))
    assert count_gpus() == 2


def test_count_gpus_when_nvidia_smi_fails(monkeypatch, tmp_path, caplog):
    smi = executable(tmp_path / "nvidia-smi", 'echo "GPU 0: x"; exit 9')
    monkeypatch.setattr(msc.shutil, "which", fake_which({"nvidia-smi": str(smi)}))
    assert count_gpus() == 0
    assert "nvidia-smi" in caplog.text


def test_count_gpus_when_nvidia_smi_hangs(monkeypatch, tmp_path):
    smi = executable(tmp_path / "nvidia-smi", "exec sleep 30")
    monkeypatch.setattr(msc.shutil, "which", fake_which({"nvidia-smi": str(smi)}))
    monkeypatch.setattr(msc, "NVIDIA_SMI_TIMEOUT_SECONDS", 0.2)
    assert count_gpus() == 0
