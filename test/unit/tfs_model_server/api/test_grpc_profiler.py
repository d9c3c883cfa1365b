"""api.grpc_profiler: ProfileOptions into TensorFlow's session options, where the trace is
written, and when a trace is empty."""

from __future__ import annotations

import time

import pytest
from tensorflow.tsl.profiler.protobuf import profiler_options_pb2, xplane_pb2

from tfs_model_server.api import grpc_profiler


def test_version_zero_options_mean_tensorflows_defaults() -> None:
    opts = profiler_options_pb2.ProfileOptions(host_tracer_level=3, duration_ms=10)
    assert grpc_profiler.session_options(opts) == {}


def test_versioned_options_carry_the_tracer_levels_and_a_delay() -> None:
    opts = profiler_options_pb2.ProfileOptions(
        version=1,
        host_tracer_level=2,
        device_tracer_level=1,
        python_tracer_level=1,
        start_timestamp_ns=time.time_ns() + 5_000_000_000,
    )
    options = grpc_profiler.session_options(opts)
    assert {k: v for k, v in options.items() if k != "delay_ms"} == {
        "host_tracer_level": 2,
        "device_tracer_level": 1,
        "python_tracer_level": 1,
    }
    assert 1000 < options["delay_ms"] <= 5000  # in the future: a delay (seconds of slack)
    past = profiler_options_pb2.ProfileOptions(version=1, start_timestamp_ns=1)
    assert grpc_profiler.session_options(past)["delay_ms"] == 0


@pytest.mark.parametrize(
    ("root", "session", "host", "expected"),
    [
        ("/logs/plugins/profile", "2026_11_25", "127.0.0.1:8500", "127.0.0.1_8500.xplane.pb"),
        ("/logs/plugins/profile/", "run", "host", "host.xplane.pb"),
    ],
)
def test_the_trace_goes_where_tensorflow_writes_it(root, session, host, expected) -> None:
    directory, path = grpc_profiler.xplane_path(root, session, host)
    assert directory == f"{root.rstrip('/')}/{session}"
    assert path == f"{directory}/{expected}"


def test_a_trace_is_empty_without_events() -> None:
    reader = grpc_profiler.messages()["XSpacePlanes"]
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    line = plane.lines.add(name="thread")
    assert grpc_profiler.is_empty(space.SerializeToString(), reader)
    line.events.add(metadata_id=1, offset_ps=0, duration_ps=5)
    assert not grpc_profiler.is_empty(space.SerializeToString(), reader)
