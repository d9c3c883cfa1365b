"""Settings.model_server_ports: internal model server port allocation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemaker_serving.config.settings import Settings, SettingsError


def settings(**env: str) -> Settings:
    return Settings.from_env(env, cpu_count=2)


def test_default_single_instance():
    assert settings().model_server_ports() == [(9000, 8501)]


def test_default_several_instances():
    assert settings(SAGEMAKER_TFS_INSTANCE_COUNT="3").model_server_ports() == [
        (9000, 8501),
        (9001, 8502),
        (9002, 8503),
    ]


def test_default_ports_hold_499_instances():
    ports = settings(SAGEMAKER_TFS_INSTANCE_COUNT="499").model_server_ports()
    assert ports[-1] == (9498, 8999)
    flat = [p for pair in ports for p in pair]
    assert len(set(flat)) == len(flat)


def test_default_ports_run_out_at_500_instances():
    with pytest.raises(SettingsError, match=r"^SAGEMAKER_TFS_INSTANCE_COUNT: .*SAFE_PORT_RANGE"):
        settings(SAGEMAKER_TFS_INSTANCE_COUNT="500").model_server_ports()


def test_safe_port_range():
    s = settings(SAGEMAKER_SAFE_PORT_RANGE="10000-10999", SAGEMAKER_TFS_INSTANCE_COUNT="2")
    assert s.model_server_ports() == [(10000, 10001), (10002, 10003)]


def test_safe_port_range_exact_fit():
    s = settings(SAGEMAKER_SAFE_PORT_RANGE="20-23", SAGEMAKER_TFS_INSTANCE_COUNT="2")
    assert s.model_server_ports() == [(20, 21), (22, 23)]


@pytest.mark.parametrize(("port_range", "count"), [("20-22", "2"), ("20-20", "1"), ("5-5", "3")])
def test_safe_port_range_too_small(port_range, count):
    s = settings(SAGEMAKER_SAFE_PORT_RANGE=port_range, SAGEMAKER_TFS_INSTANCE_COUNT=count)
    with pytest.raises(SettingsError) as info:
        s.model_server_ports()
    assert str(info.value).startswith("SAGEMAKER_SAFE_PORT_RANGE: ")
    assert "SAGEMAKER_TFS_INSTANCE_COUNT" in str(info.value)


@pytest.mark.parametrize(
    "env",
    [
        {"SAGEMAKER_BIND_TO_PORT": "9000"},
        {"SAGEMAKER_BIND_TO_PORT": "8501"},
        {"SAGEMAKER_BIND_TO_PORT": "8502", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"},
        {"SAGEMAKER_BIND_TO_PORT": "8080", "SAGEMAKER_SAFE_PORT_RANGE": "8079-8090"},
    ],
)
def test_bind_port_clash(env):
    with pytest.raises(SettingsError, match=r"^SAGEMAKER_BIND_TO_PORT: port \d+ is also the"):
        settings(**env).model_server_ports()


def test_bind_port_outside_allocation_is_fine():
    s = settings(SAGEMAKER_BIND_TO_PORT="8503", SAGEMAKER_TFS_INSTANCE_COUNT="2")
    assert s.model_server_ports() == [(9000, 8501), (9001, 8502)]


@given(
    low=st.integers(1, 65535),
    span=st.integers(0, 400),
    count=st.integers(1, 250),
    bind=st.integers(1, 65535),
)
def test_range_allocation_properties(low, span, count, bind):
    high = min(65535, low + span)
    s = settings(
        SAGEMAKER_SAFE_PORT_RANGE=f"{low}-{high}",
        SAGEMAKER_TFS_INSTANCE_COUNT=str(count),
        SAGEMAKER_BIND_TO_PORT=str(bind),
    )
    try:
        ports = s.model_server_ports()
    except SettingsError as exc:
        assert 2 * count > high - low + 1 or low <= bind <= low + 2 * count - 1, exc
        return
    flat = [p for pair in ports for p in pair]
    assert len(ports) == count
    assert len(set(flat)) == len(flat)
    assert all(low <= p <= high for p in flat)
    assert bind not in flat
