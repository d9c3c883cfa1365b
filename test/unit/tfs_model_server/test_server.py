"""tfs_model_server.server: options into batching and model configs, and a whole ModelServer in this
process (half_plus_two on free loopback ports, REST and gRPC), started and stopped."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
import requests
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from process_utils import free_port
from tfs_model_server.batching.options import BatchingOptions
from tfs_model_server.cli import flags
from tfs_model_server.cli.main import START_FAILED, main
from tfs_model_server.errors import ServingError
from tfs_model_server.options import ServerOptions
from tfs_model_server.server import (
    ModelServer,
    batching_options,
    check_files,
    initial_configs,
    model_batching,
)


def _options(*args: str) -> ServerOptions:
    return flags.parse(list(args))


def _run_on_loopback(*args: str) -> int:
    """tfs-model-server's main() with `args`, on a free loopback port should it get as far as
    serving; its exit code."""
    return main([*args, f"--port={free_port()}", "--bind_address=127.0.0.1"])


def test_batching_options_read_the_parameters_file(tmp_path: Path) -> None:
    path = tmp_path / "batching.config"
    path.write_text(
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
        "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\npad_variable_length_inputs: true\n"
    )
    options = batching_options(_options(f"--batching_parameters_file={path}"))
    assert (options.max_batch_size, options.batch_timeout_micros) == (8, 500)
    assert options.allowed_batch_sizes == (4, 8) and options.pad_variable_length_inputs
    assert options.max_enqueued_batches == 10  # TF's default for what the file leaves out
    path.write_text("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n")
    with pytest.raises(ServingError, match="Last entry in allowed_batch_sizes"):
        batching_options(_options(f"--batching_parameters_file={path}"))


def test_a_models_own_batching_parameters_keep_the_shared_threads(tmp_path: Path) -> None:
    shared = BatchingOptions(num_batch_threads=3, thread_pool_name="pool", max_batch_size=64)
    assert model_batching(tmp_path, shared) is None  # no file: the model is not batched
    (tmp_path / "batching_params.pbtxt").write_text(
        "max_batch_size { value: 4 }\nnum_batch_threads { value: 9 }\n"
        "thread_pool_name { value: 'own' }\nallowed_batch_sizes: 2\nallowed_batch_sizes: 4\n"
    )
    own = model_batching(tmp_path, shared)
    assert own is not None
    assert (own.max_batch_size, own.allowed_batch_sizes) == (4, (2, 4))
    assert (own.num_batch_threads, own.thread_pool_name) == (3, "pool")
    (tmp_path / "batching_params.pbtxt").write_text("max_batch_size { value: 0 }\n")
    with pytest.raises(ServingError):
        model_batching(tmp_path, shared)


def test_initial_configs(tmp_path: Path) -> None:
    [config] = initial_configs(_options("--model_base_path=/models/a", "--model_name=a"))
    assert (config.name, config.base_path, config.model_platform) == (
        "a",
        "/models/a",
        "tensorflow",
    )
    path = tmp_path / "models.config"
    path.write_text(
        "model_config_list { config { name: 'x' base_path: '/x' model_platform: 'tensorflow' }"
        " config { name: 'y' base_path: '/y' model_platform: 'tensorflow' } }"
    )
    assert [c.name for c in initial_configs(_options(f"--model_config_file={path}"))] == ["x", "y"]


def test_check_files_names_the_missing_one(tmp_path: Path) -> None:
    missing = tmp_path / "none.config"
    with pytest.raises(ServingError) as info:
        check_files(_options(f"--monitoring_config_file={missing}"))
    assert info.value.status_text() == f"NOT_FOUND: {missing}; No such file or directory"


def test_check_files_covers_the_session_config(tmp_path: Path) -> None:
    missing = tmp_path / "session.config"
    with pytest.raises(ServingError) as info:
        check_files(_options(f"--tensorflow_session_config_file={missing}"))
    assert info.value.status_text() == f"NOT_FOUND: {missing}; No such file or directory"


def test_run_refuses_all_three_thread_flags_as_tf_serving_does(capsys) -> None:
    status = _run_on_loopback(
        "--model_base_path=/m",
        "--tensorflow_session_parallelism=2",
        "--tensorflow_intra_op_parallelism=2",
        "--tensorflow_inter_op_parallelism=2",
    )
    assert status == START_FAILED == 255  # TF Serving's main() returns -1
    assert "Failed to start server. Error: INVALID_ARGUMENT: Either configure server_options." in (
        capsys.readouterr().out
    )


def test_run_reports_a_failed_start(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad" / "1"
    bad.mkdir(parents=True)
    (bad / "saved_model.pb").write_bytes(b"not a saved model")
    assert _run_on_loopback(f"--model_base_path={bad.parent}", "--max_num_load_retries=0") == 255
    assert "Failed to start server. Error: UNKNOWN: 1 model(s) did not become available" in (
        capsys.readouterr().out
    )


@pytest.fixture(scope="module")
def server(model_root: Path, tmp_path_factory):
    rest_port, grpc_port = free_port(), free_port()
    monitoring = tmp_path_factory.mktemp("server") / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }")
    options = _options(
        f"--model_base_path={model_root / 'half_plus_two'}",
        "--model_name=hp2",
        f"--port={grpc_port}",
        f"--rest_api_port={rest_port}",
        "--bind_address=127.0.0.1",
        f"--monitoring_config_file={monitoring}",
        "--file_system_poll_wait_seconds=0",
    )
    model_server = ModelServer(options)
    model_server.start()
    serving = threading.Thread(target=model_server.serve, daemon=True)
    serving.start()
    rest = f"http://127.0.0.1:{rest_port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"{rest}/v1/models/hp2", timeout=2)
            break
        except requests.ConnectionError:
            assert time.monotonic() < deadline, "REST never answered"
            time.sleep(0.05)
    yield rest, f"127.0.0.1:{grpc_port}"
    model_server.stop()
    serving.join(10)
    assert not serving.is_alive()


def test_serves_rest_and_grpc(server) -> None:
    rest, target = server
    status = requests.get(f"{rest}/v1/models/hp2", timeout=10).json()
    assert status["model_version_status"][0]["state"] == "AVAILABLE"
    reply = requests.post(f"{rest}/v1/models/hp2:predict", json={"instances": [[2.0]]}, timeout=10)
    assert reply.json() == {"predictions": [[3.0]]}
    with grpc.insecure_channel(target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "hp2"
        assert stub.GetModelStatus(request, timeout=10).model_version_status[0].version == 123


def test_exports_prometheus_metrics(server) -> None:
    rest, _ = server
    text = requests.get(f"{rest}/monitoring/prometheus/metrics", timeout=10).text
    assert ':tensorflow:cc:saved_model:load_attempt_count{model_path="' in text


def test_num_load_threads_loads_new_models_side_by_side(
    model_root: Path, tmp_path: Path, monkeypatch
) -> None:
    """After the first load, two new models load at once with --num_load_threads=2: each
    load waits (10 s at most) until the other has begun."""
    from tensorflow_serving.config import model_server_config_pb2

    from tfs_model_server import server as server_module

    meeting = threading.Barrier(2, timeout=10)

    class Meeting(server_module.Servable):
        def __init__(self, name: str, *args, **kwargs) -> None:
            if name != "first":
                meeting.wait()
            super().__init__(name, *args, **kwargs)

    monkeypatch.setattr(server_module, "Servable", Meeting)
    base = str(model_root / "half_plus_two")
    model_server = ModelServer(
        _options(
            f"--model_base_path={base}",
            "--num_load_threads=2",
            "--max_num_load_retries=0",
            "--file_system_poll_wait_seconds=0",
        )
    )
    config = model_server_config_pb2.ModelServerConfig()
    for names in (["first"], ["second", "third"]):  # the initial load, then two new models
        for name in names:
            config.model_config_list.config.add(
                name=name, base_path=base, model_platform="tensorflow"
            )
        model_server.reload_config(config)
    try:
        assert [model_server.manager.version_states(n)[0][2] for n in ("second", "third")] == [
            None,
            None,
        ]
    finally:
        model_server.manager.close()


def _series(page: bytes) -> set[str]:
    """The series of a Prometheus page (name and labels, without values)."""
    lines = page.decode().splitlines()
    return {line.rpartition(" ")[0] for line in lines if line and not line.startswith("#")}


def test_an_unloaded_model_leaves_the_metrics_page(model_root: Path, tmp_path: Path) -> None:
    """A model's series go when it leaves the config (its name and its version paths), and
    requests for names not in the config are not counted: a stream of distinct models
    leaves the page as it was."""
    from tensorflow_serving.config import model_server_config_pb2

    from tfs_model_server.core.dataplane import ModelRef

    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text("prometheus_config { enable: true }")
    model_server = ModelServer(
        _options(
            f"--model_base_path={model_root / 'half_plus_two'}",
            "--model_name=stays",
            f"--monitoring_config_file={monitoring}",
            "--file_system_poll_wait_seconds=0",
        )
    )
    base = str(model_root / "half_plus_three")

    def config(*names: str) -> model_server_config_pb2.ModelServerConfig:
        config = model_server_config_pb2.ModelServerConfig()
        for name in names:
            config.model_config_list.config.add(
                name=name, base_path=base, model_platform="tensorflow"
            )
        return config

    try:
        model_server.reload_config(config("stays"))
        before = _series(model_server.metrics.render())
        for round_ in range(3):
            name = f"churn{round_}"
            model_server.reload_config(config("stays", name))
            model_server.plane.metrics.record_success(name, "predict", "REST", time.perf_counter())
            assert f'model_name="{name}"'.encode() in model_server.metrics.render()
            model_server.plane.metrics.record_request(f"never{round_}", "predict", "NOT_FOUND")
            model_server.reload_config(config("stays"))
            page = model_server.metrics.render()
            assert name.encode() not in page and b"never" not in page
        assert _series(model_server.metrics.render()) == before
        assert any(base in line for line in before)  # "stays" shares the churned base path
        assert model_server.plane.status(ModelRef("stays"))
    finally:
        model_server.manager.close()
