"""docker/loopback_bind.c: preloaded, a wildcard bind() binds the loopback (as serve runs the real
tensorflow_model_server in the images). Built here with the C compiler when there is one."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

SOURCE = Path(__file__).resolve().parents[3] / "docker" / "loopback_bind.c"

# binds as TF Serving does: gRPC "0.0.0.0:port" (grpc C-core), REST "::" (dual-stack, libevent)
LISTENER = """
import concurrent.futures, json, socket, sys, time
import grpc

v4 = socket.socket(); v4.bind(("0.0.0.0", 0)); v4.listen()
v6 = socket.socket(socket.AF_INET6)
v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
v6.bind(("::", 0)); v6.listen()
v6only = socket.socket(socket.AF_INET6)
v6only.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
v6only.bind(("::", 0)); v6only.listen()
server = grpc.server(concurrent.futures.ThreadPoolExecutor(1))
grpc_port = server.add_insecure_port("0.0.0.0:0")
server.start()
print(json.dumps({
    "v4": v4.getsockname()[1], "v6": v6.getsockname()[1], "v6only": v6only.getsockname()[1],
    "grpc": grpc_port,
}), flush=True)
time.sleep(60)
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("loopback") / "loopback_bind.so"
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"]
    subprocess.run(
        [compiler, *flags, "-o", str(out), str(SOURCE), "-ldl"],
        check=True,
        timeout=120,
    )
    return out


def _outside_address() -> str | None:
    """A non-loopback IPv4 address of this host, if it has one."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def _listen(preload: Path | None) -> tuple[subprocess.Popen, dict[str, int]]:
    env = dict(os.environ)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    proc = subprocess.Popen(
        [sys.executable, "-c", LISTENER], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"the listener exited {proc.wait(10)}")
    return proc, json.loads(line)


def _bound(pid: int) -> dict[int, str]:
    return {
        c.laddr.port: c.laddr.ip
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def _connects(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, port)) == 0


@pytest.mark.parametrize("preloaded", [True, False], ids=["preloaded", "plain"])
def test_wildcard_binds_become_loopback_binds(library, preloaded):
    proc, ports = _listen(library if preloaded else None)
    try:
        bound = _bound(proc.pid)
        outside = _outside_address()
        for name, port in ports.items():
            assert _loopback(bound[port]) == preloaded, (name, bound[port])
            if name != "v6only":  # IPv4 clients (nginx) reach the dual-stack and v4 ones
                assert _connects("127.0.0.1", port), name
            if outside is not None and name != "v6only":
                assert _connects(outside, port) != preloaded, (name, outside)
        if preloaded:
            assert bound[ports["v6only"]] == "::1"
            assert bound[ports["v6"]] == "::ffff:127.0.0.1"
    finally:
        proc.kill()
        proc.wait(10)


def test_a_specific_address_is_left_alone(library):
    code = (
        "import socket\ns = socket.socket(); s.bind(('127.0.0.2', 0)); print(s.getsockname()[0])\n"
    )
    env = {**os.environ, "LD_PRELOAD": str(library)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "127.0.0.2", result.stderr


def test_the_tf_serving_images_build_it_where_serve_looks():
    from sagemaker_serving.launcher.model_server_command import LOOPBACK_BIND_LIBRARY

    text = (SOURCE.parent / "Dockerfile").read_text()
    assert "COPY docker/loopback_bind.c /src/loopback_bind.c" in text
    # the images' venv is /opt/venv, serve's sys.prefix there; the cpu and gpu targets copy it
    relative = LOOPBACK_BIND_LIBRARY.relative_to(sys.prefix)
    assert text.count(f"COPY --from=loopback /src/loopback_bind.so /opt/venv/{relative}\n") == 2
