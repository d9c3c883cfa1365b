"""--enable_profiler (on by default, as in TF Serving): TensorFlow's profiler service on the
gRPC port, driven by TensorFlow's own client (what TensorBoard's "Capture profile" calls)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
import requests

from conftest import model_server
from tfs_model_server.api import grpc_profiler

TIMEOUT = 10
ARGS = ["--model_name=hp2"]


def base_args(model_root: Path) -> list[str]:
    return [f"--model_base_path={model_root}/half_plus_two", *ARGS]


def predicting(rest: str, stop: threading.Event) -> threading.Thread:
    """Predict requests until `stop`: something for the profile to see."""

    def run() -> None:
        with requests.Session() as session:
            while not stop.is_set():
                session.post(
                    f"{rest}/v1/models/hp2:predict", json={"instances": [1.0]}, timeout=TIMEOUT
                )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_tensorflows_client_traces_the_server(model_root, tmp_path):
    import tensorflow as tf

    logdir = tmp_path / "logdir"
    with model_server(base_args(model_root), tmp_path / "log", "hp2") as server:
        stop = threading.Event()
        load = predicting(server.rest, stop)
        try:
            tf.profiler.experimental.client.trace(
                f"grpc://{server.grpc_target}", str(logdir), 1000, num_tracing_attempts=3
            )
        finally:
            stop.set()
            load.join(TIMEOUT)
        assert "Profiler service is enabled" in server.log()
    [xplane] = (logdir / "plugins" / "profile").glob("*/*.xplane.pb")
    assert xplane.name == server.grpc_target.replace(":", "_") + ".xplane.pb"
    assert not grpc_profiler.is_empty(xplane.read_bytes(), grpc_profiler.messages()["XSpacePlanes"])


def call(channel: grpc.Channel, method: str, request, response_class):
    """One unary call; `request` a message, or bytes sent as they are."""
    stub = channel.unary_unary(
        f"/{grpc_profiler.SERVICE}/{method}",
        request_serializer=None if isinstance(request, bytes) else type(request).SerializeToString,
        response_deserializer=response_class.FromString if response_class else None,
    )
    return stub(request, timeout=TIMEOUT)


def test_terminate_ends_a_profile_early_and_emit_xspace_answers_it(model_root, tmp_path):
    messages = grpc_profiler.messages()
    request = messages["ProfileRequest"](session_id="s1", emit_xspace=True)
    request.opts.version = 1
    request.opts.host_tracer_level = 2
    request.opts.duration_ms = 60_000
    with (
        model_server(base_args(model_root), tmp_path / "log", "hp2") as server,
        grpc.insecure_channel(server.grpc_target) as channel,
    ):
        answers: list = []
        profile = threading.Thread(
            target=lambda: answers.append(
                call(channel, "Profile", request, messages["ProfileResponse"])
            )
        )
        started = time.monotonic()
        profile.start()
        while "Received a profile request for 60000 ms" not in server.log():
            assert time.monotonic() - started < TIMEOUT, "the profile never began"
            time.sleep(0.05)
        second = messages["ProfileRequest"](session_id="s2", emit_xspace=True)
        with pytest.raises(grpc.RpcError) as busy:  # one profile at a time
            call(channel, "Profile", second, messages["ProfileResponse"])
        assert busy.value.code() == grpc.StatusCode.INTERNAL
        call(channel, "Terminate", messages["TerminateRequest"](session_id="s1"), None)
        profile.join(TIMEOUT)
        assert not profile.is_alive() and time.monotonic() - started < TIMEOUT
        [answer] = answers
        assert answer.xspace  # the trace comes back in the answer, nothing is written
        assert not list(tmp_path.glob("**/*.xplane.pb"))
        with pytest.raises(grpc.RpcError) as monitor:
            call(channel, "Monitor", b"", None)
        assert (monitor.value.code(), monitor.value.details()) == (
            grpc.StatusCode.UNIMPLEMENTED,
            "unimplemented.",
        )


def test_enable_profiler_false_serves_no_profiler(model_root, tmp_path):
    messages = grpc_profiler.messages()
    args = [*base_args(model_root), "--enable_profiler=false"]
    with model_server(args, tmp_path / "log", "hp2") as server:
        with (
            grpc.insecure_channel(server.grpc_target) as channel,
            pytest.raises(grpc.RpcError) as info,
        ):
            call(channel, "Terminate", messages["TerminateRequest"](session_id="x"), None)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "Profiler service is enabled" not in server.log()
