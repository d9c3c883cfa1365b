"""Tests for sagemaker_serving.config.settings: parsing, validation, defaults and derived values."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

import pytest

from sagemaker_serving.config import settings as settings_module
from sagemaker_serving.config.settings import VARIABLES, Settings, SettingsError

FIELD_OF = {f.metadata["variable"].name: f.name for f in dataclasses.fields(Settings) if f.metadata}


def parse(cpu_count: int = 4, **env: str) -> Settings:
    return Settings.from_env(env, cpu_count=cpu_count)


def test_defaults():
    s = parse(cpu_count=4)
    assert dataclasses.asdict(s) == {
        "bind_to_port": 8080,
        "safe_port_range": None,
        "multi_model": False,
        "default_model_name": None,
        "enable_batching": False,
        "max_batch_size": 8,
        "batch_timeout_micros": 1000,
        "num_batch_threads": 4,
        "max_enqueued_batches": 4,
        "batch": False,
        "instance_count": 1,
        "gpu_memory_margin": 0.2,
        "inter_op_parallelism": 0,
        "intra_op_parallelism": 0,
        "model_server_flags": (),
        "wait_time_seconds": 300,
        "nginx_log_level": "error",
        "tfs_version": None,
        "gunicorn_workers": 4,
        "gunicorn_threads": 8,
        "gunicorn_worker_class": "uvicorn",
        "gunicorn_log_level": "info",
        "model_server_timeout_seconds": None,
        "gunicorn_timeout_seconds": 30,
        "log_format": "text",
        "log_ping": True,
        "nginx_proxy_read_timeout_seconds": 60,
        "nginx_client_timeout_seconds": 10,
        "nginx_worker_processes": 2,
        "nginx_max_connections_per_client": 1024,
        "universal_bucket": None,
        "universal_prefix": None,
        "mme_memory_reserve_mb": 256,
        "handler_processes": 4,
        "pip_max_memory_mb": 2048,
        "environment_max_disk_mb": 4096,
        "mme_max_environments": 8,
        "max_payload_in_mb": None,
        "max_request_size": None,
        "max_response_size": None,
        "batch_strategy": None,
        "max_concurrent_transforms": None,
        "onednn_system_allocator": None,
        "omp_num_threads": "1",
        "cpu_count": 4,
    }
    assert s.proxy_read_timeout_seconds == 60
    assert s.body_limit_bytes == 100 * 1024 * 1024


def test_reads_os_environ_and_cpu_count_by_default(monkeypatch):
    monkeypatch.setenv("SAGEMAKER_TFS_INSTANCE_COUNT", "3")
    monkeypatch.delenv("SAGEMAKER_TFS_NUM_BATCH_THREADS", raising=False)
    monkeypatch.setattr(settings_module.os, "cpu_count", lambda: 7)
    s = Settings.from_env()
    assert s.instance_count == 3
    assert s.cpu_count == 7
    assert s.num_batch_threads == 7


def test_unknown_cpu_count_counts_as_one(monkeypatch):
    monkeypatch.setattr(settings_module.os, "cpu_count", lambda: None)
    assert Settings.from_env({}).cpu_count == 1


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse().bind_to_port = 1  # type: ignore[misc]


def test_every_variable_sets_its_field():
    env = {
        "SAGEMAKER_BIND_TO_PORT": " 65535 ",
        "SAGEMAKER_SAFE_PORT_RANGE": " 10 - 20 ",
        "SAGEMAKER_MULTI_MODEL": "TRUE",
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "0-model.v2",
        "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
        "SAGEMAKER_TFS_MAX_BATCH_SIZE": "128",
        "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "0",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS": "2",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "1000000",
        "SAGEMAKER_BATCH": "True",
        "SAGEMAKER_TFS_INSTANCE_COUNT": "+4",
        "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN": "0.5",
        "SAGEMAKER_TFS_INTER_OP_PARALLELISM": "2",
        "SAGEMAKER_TFS_INTRA_OP_PARALLELISM": "16",
        "SAGEMAKER_TFS_MODEL_SERVER_FLAGS": "--rest_api_num_threads=3 '--saved_model_tags=a,b'",
        "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "600",
        "SAGEMAKER_TFS_NGINX_LOGLEVEL": "WARN",
        "SAGEMAKER_TFS_VERSION": "2.21",
        "SAGEMAKER_GUNICORN_WORKERS": "6",
        "SAGEMAKER_GUNICORN_THREADS": "16",
        "SAGEMAKER_GUNICORN_WORKER_CLASS": "Sync",
        "SAGEMAKER_GUNICORN_LOGLEVEL": "Debug",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "120",
        "SAGEMAKER_LOG_FORMAT": "JSON",
        "SAGEMAKER_LOG_PING": "false",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "300",
        "SAGEMAKER_NGINX_CLIENT_TIMEOUT_SECONDS": "30",
        "SAGEMAKER_NGINX_WORKER_PROCESSES": "3",
        "SAGEMAKER_NGINX_MAX_CONNECTIONS_PER_CLIENT": "64",
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "bucket",
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "code/v1",
        "SAGEMAKER_MME_MEMORY_RESERVE_MB": "512",
        "SAGEMAKER_HANDLER_PROCESSES": "3",
        "SAGEMAKER_PIP_MAX_MEMORY_MB": "512",
        "SAGEMAKER_ENVIRONMENT_MAX_DISK_MB": "100",
        "SAGEMAKER_MME_MAX_ENVIRONMENTS": "20",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "100",
        "SAGEMAKER_MAX_REQUEST_SIZE": "1073741824",
        "SAGEMAKER_MAX_RESPONSE_SIZE": "7",
        "SAGEMAKER_BATCH_STRATEGY": "SingleRecord",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "16",
        "OMP_NUM_THREADS": "4",
    }
    assert sorted(env) == sorted(v.name for v in VARIABLES)
    assert dataclasses.asdict(parse(cpu_count=4, **env)) == {
        "cpu_count": 4,
        "bind_to_port": 65535,
        "safe_port_range": (10, 20),
        "multi_model": True,
        "default_model_name": "0-model.v2",
        "enable_batching": True,
        "max_batch_size": 128,
        "batch_timeout_micros": 0,
        "num_batch_threads": 2,
        "max_enqueued_batches": 1000000,
        "batch": True,
        "instance_count": 4,
        "gpu_memory_margin": 0.5,
        "inter_op_parallelism": 2,
        "intra_op_parallelism": 16,
        "model_server_flags": ("--rest_api_num_threads=3", "--saved_model_tags=a,b"),
        "wait_time_seconds": 600,
        "nginx_log_level": "warn",
        "tfs_version": "2.21",
        "gunicorn_workers": 6,
        "gunicorn_threads": 16,
        "gunicorn_worker_class": "sync",
        "gunicorn_log_level": "debug",
        "model_server_timeout_seconds": 3600,
        "gunicorn_timeout_seconds": 120,
        "log_format": "json",
        "log_ping": False,
        "nginx_proxy_read_timeout_seconds": 300,
        "nginx_client_timeout_seconds": 30,
        "nginx_worker_processes": 3,
        "nginx_max_connections_per_client": 64,
        "universal_bucket": "bucket",
        "universal_prefix": "code/v1",
        "mme_memory_reserve_mb": 512,
        "handler_processes": 3,
        "pip_max_memory_mb": 512,
        "environment_max_disk_mb": 100,
        "mme_max_environments": 20,
        "onednn_system_allocator": False,
        "max_payload_in_mb": 100,
        "max_request_size": 1073741824,
        "max_response_size": 7,
        "batch_strategy": "SINGLE_RECORD",
        "max_concurrent_transforms": 16,
        "omp_num_threads": "4",
    }


def test_the_model_server_timeout_is_every_part_s_deadline_unless_a_finer_setting_says():
    s = parse(SAGEMAKER_MODEL_SERVER_TIMEOUT="3600")
    assert (s.gunicorn_timeout_seconds, s.proxy_read_timeout_seconds) == (3600, 3600)
    s = parse(SAGEMAKER_MODEL_SERVER_TIMEOUT="20", SAGEMAKER_GUNICORN_TIMEOUT_SECONDS="5")
    assert (s.gunicorn_timeout_seconds, s.proxy_read_timeout_seconds) == (5, 20)
    s = parse(SAGEMAKER_MODEL_SERVER_TIMEOUT="20", SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS="90")
    assert (s.gunicorn_timeout_seconds, s.proxy_read_timeout_seconds) == (20, 90)
    with pytest.raises(SettingsError, match=r"^SAGEMAKER_MODEL_SERVER_TIMEOUT: "):
        parse(SAGEMAKER_MODEL_SERVER_TIMEOUT="3601")


def test_the_request_size_is_the_body_limit_up_to_one_gib():
    assert parse(SAGEMAKER_MAX_REQUEST_SIZE="1073741824").body_limit_bytes == 1 << 30
    both = parse(SAGEMAKER_MAX_REQUEST_SIZE="1000", SAGEMAKER_MAX_PAYLOAD_IN_MB="6")
    assert both.body_limit_bytes == 1000
    assert parse(SAGEMAKER_MAX_PAYLOAD_IN_MB="6").body_limit_bytes == 6 << 20
    for name in ("SAGEMAKER_MAX_REQUEST_SIZE", "SAGEMAKER_MAX_RESPONSE_SIZE"):
        with pytest.raises(SettingsError, match=rf"^{name}: "):
            parse(**{name: "1073741825"})


def test_the_default_model_name_none_counts_as_unset():
    assert parse(SAGEMAKER_TFS_DEFAULT_MODEL_NAME="None").default_model_name is None


def test_handler_processes_follow_the_workers_but_one_per_model_on_multi_model():
    assert parse(cpu_count=4).handler_processes == 4
    assert parse(SAGEMAKER_GUNICORN_WORKERS="3").handler_processes == 3
    assert parse(SAGEMAKER_MULTI_MODEL="true").handler_processes == 1


def test_multi_model_uses_the_system_allocator_unless_told_otherwise():
    assert parse(SAGEMAKER_MULTI_MODEL="true").onednn_system_allocator is True
    mme_pool = parse(SAGEMAKER_MULTI_MODEL="true", TF_ONEDNN_USE_SYSTEM_ALLOCATOR="0")
    assert mme_pool.onednn_system_allocator is False


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("SAGEMAKER_BIND_TO_PORT", "0"),
        ("SAGEMAKER_BIND_TO_PORT", "65536"),
        ("SAGEMAKER_BIND_TO_PORT", "80a"),
        ("SAGEMAKER_BIND_TO_PORT", "8080.0"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9000"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9999-9000"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "0-10"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9000-70000"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "a-b"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "-5-10"),
        ("SAGEMAKER_MULTI_MODEL", "1"),
        ("SAGEMAKER_MULTI_MODEL", "yes"),
        ("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "yes"),
        ("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "2"),
        ("SAGEMAKER_TFS_ENABLE_BATCHING", "on"),
        ("SAGEMAKER_BATCH", "0"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", "my model"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", "-model"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", ".model"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", "a/b"),
        ("SAGEMAKER_TFS_DEFAULT_MODEL_NAME", "m" * 256),
        ("SAGEMAKER_TFS_MAX_BATCH_SIZE", "0"),
        ("SAGEMAKER_TFS_MAX_BATCH_SIZE", str(2**63)),
        ("SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS", "-1"),
        ("SAGEMAKER_TFS_NUM_BATCH_THREADS", "0"),
        ("SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES", "0"),
        ("SAGEMAKER_TFS_INSTANCE_COUNT", "0"),
        ("SAGEMAKER_TFS_INSTANCE_COUNT", "1_000"),
        ("SAGEMAKER_TFS_INSTANCE_COUNT", "٣"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "1"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "-0.1"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "nan"),
        ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "lots"),
        ("SAGEMAKER_TFS_INTER_OP_PARALLELISM", "-1"),
        ("SAGEMAKER_TFS_INTRA_OP_PARALLELISM", "two"),
        ("SAGEMAKER_TFS_WAIT_TIME_SECONDS", "0"),
        ("SAGEMAKER_TFS_WAIT_TIME_SECONDS", "99999999"),
        ("SAGEMAKER_TFS_NGINX_LOGLEVEL", "verbose"),
        ("SAGEMAKER_GUNICORN_WORKERS", "0"),
        ("SAGEMAKER_GUNICORN_THREADS", "-2"),
        ("SAGEMAKER_GUNICORN_WORKER_CLASS", "eventlet"),
        ("SAGEMAKER_GUNICORN_LOGLEVEL", "warn"),
        ("SAGEMAKER_LOG_FORMAT", "xml"),
        ("SAGEMAKER_GUNICORN_TIMEOUT_SECONDS", "0"),
        ("SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS", "-60"),
        ("SAGEMAKER_MAX_PAYLOAD_IN_MB", "101"),
        ("SAGEMAKER_MAX_PAYLOAD_IN_MB", "-1"),
        ("SAGEMAKER_MAX_PAYLOAD_IN_MB", "6.5"),
        ("SAGEMAKER_BATCH_STRATEGY", "MULTI"),
        ("SAGEMAKER_BATCH_STRATEGY", "None"),
        ("SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "0"),
    ],
)
def test_rejects_bad_value_naming_the_variable(name, raw):
    with pytest.raises(SettingsError) as info:
        parse(**{name: raw})
    assert str(info.value).startswith(f"{name}: ")
    assert repr(raw.strip()) in str(info.value)


def test_error_message_format():
    with pytest.raises(SettingsError) as info:
        parse(SAGEMAKER_TFS_INSTANCE_COUNT="abc")
    assert str(info.value) == "SAGEMAKER_TFS_INSTANCE_COUNT: expected a positive integer, got 'abc'"
    with pytest.raises(SettingsError, match=r"^SAGEMAKER_BIND_TO_PORT: .*1 to 65535"):
        parse(SAGEMAKER_BIND_TO_PORT="0")


@pytest.mark.parametrize("raw", ["", "   ", "\t\n"])
def test_blank_values_take_the_default(raw):
    env = {v.name: raw for v in VARIABLES}
    assert parse(cpu_count=3, **env) == parse(cpu_count=3)


def test_max_enqueued_batches_default_in_batch_transform():
    assert parse(cpu_count=4, SAGEMAKER_BATCH="true").max_enqueued_batches == 100_000_000
    assert parse(cpu_count=4, SAGEMAKER_BATCH="false").max_enqueued_batches == 4
    explicit = parse(SAGEMAKER_BATCH="TRUE", SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES="12")
    assert explicit.max_enqueued_batches == 12


def test_proxy_read_timeout_is_at_least_the_gunicorn_timeout():
    s = parse(SAGEMAKER_GUNICORN_TIMEOUT_SECONDS="120")
    assert s.proxy_read_timeout_seconds == 120
    s = parse(
        SAGEMAKER_GUNICORN_TIMEOUT_SECONDS="120", SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS="200"
    )
    assert s.proxy_read_timeout_seconds == 200


@pytest.mark.parametrize(
    ("raw", "expected"), [("6", 6 << 20), ("100", 100 << 20), ("0", 100 << 20)]
)
def test_body_limit(raw, expected):
    assert parse(SAGEMAKER_MAX_PAYLOAD_IN_MB=raw).body_limit_bytes == expected


def test_explicit_cpu_count_floor():
    assert parse(cpu_count=0).cpu_count == 1


class RecordingEnv(Mapping[str, str]):
    """An empty environment that records every name looked up."""

    def __init__(self) -> None:
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_variables_document_exactly_what_from_env_reads():
    env = RecordingEnv()
    Settings.from_env(env, cpu_count=2)
    documented = [v.name for v in VARIABLES]
    assert len(documented) == len(set(documented))
    assert env.read == set(documented)


def test_every_variable_has_its_meaning_and_every_field_but_cpu_count_a_variable():
    assert len([v for v in VARIABLES if v.name.startswith("SAGEMAKER_")]) == 42
    assert [v.name for v in VARIABLES if not v.doc] == []
    assert [f.name for f in dataclasses.fields(Settings) if not f.metadata] == ["cpu_count"]
    assert list(FIELD_OF.values()) == [f.name for f in dataclasses.fields(Settings)][1:]


def test_documented_literal_defaults_match():
    defaults = parse(cpu_count=4)
    checked = 0
    for variable in VARIABLES:
        if " " in variable.default_text:
            continue  # a description, not a literal value
        value = getattr(defaults, FIELD_OF[variable.name])
        shown = "unset" if value is None else str(value).lower()
        assert shown == variable.default_text, variable.name
        checked += 1
    assert checked >= 20


def test_described_defaults():
    described = {v.name: v.default_text for v in VARIABLES if " " in v.default_text}
    assert described == {
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "first model by name",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS": "number of CPUs",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "number of CPUs; 100000000 in batch transform",
        "SAGEMAKER_GUNICORN_WORKERS": "number of CPUs",
        "SAGEMAKER_NGINX_WORKER_PROCESSES": "half the CPUs, at least 1",
        "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "`1` multi-model, else unset",
        "SAGEMAKER_HANDLER_PROCESSES": "gunicorn workers; 1 per model on a multi-model endpoint",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "SAGEMAKER_MODEL_SERVER_TIMEOUT, else 30",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "SAGEMAKER_MODEL_SERVER_TIMEOUT, else 60",
    }
