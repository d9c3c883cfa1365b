"""docker/loopback_guard.c: preloaded (as serve runs either model server), a wildcard bind()
binds the loopback, and a TCP connection from a process of another user is closed at accept.
Built here with the C compiler when there is one."""

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

SOURCE = Path(__file__).resolve().parents[3] / "docker" / "loopback_guard.c"

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
    out = tmp_path_factory.mktemp("loopback") / "loopback_guard.so"
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


def test_the_images_build_it_where_serve_looks():
    from sagemaker_serving.launcher.model_server_command import LOOPBACK_GUARD_LIBRARY

    text = (SOURCE.parent / "Dockerfile").read_text()
    assert "COPY docker/loopback_guard.c /src/loopback_guard.c" in text
    # the images' venv is /opt/venv, serve's sys.prefix there; every target copies it
    relative = LOOPBACK_GUARD_LIBRARY.relative_to(sys.prefix)
    assert text.count(f"COPY --from=loopback /src/loopback_guard.so /opt/venv/{relative}\n") == 3


# ----- accept: only processes of the listener's own user are served ---------------------------

# accepts as TF Serving's servers do: gRPC (C-core, accept4), a dual-stack socket (libevent's
# REST listens on "::") and a plain IPv4 one with blocking accept(); each answers "hi"
SERVING = """
import concurrent.futures, json, socket, threading, time
import grpc

def answer(listener):
    while True:
        conn, _ = listener.accept()
        conn.sendall(b"hi")
        conn.close()

v4 = socket.socket(); v4.bind(("127.0.0.1", 0)); v4.listen()
v6 = socket.socket(socket.AF_INET6)
v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
v6.bind(("::", 0)); v6.listen()
for listener in (v4, v6):
    threading.Thread(target=answer, args=(listener,), daemon=True).start()
server = grpc.server(concurrent.futures.ThreadPoolExecutor(1))
grpc_port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(json.dumps({"v4": v4.getsockname()[1], "v6": v6.getsockname()[1], "grpc": grpc_port}),
      flush=True)
time.sleep(120)
"""

# what a client gets from each port: the first bytes, or "" when the server closed at once
CLIENT = """
import json, socket, sys
out = {}
for name, port in json.loads(sys.argv[1]).items():
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        if name == "grpc":  # the HTTP/2 preface: a gRPC server answers with its SETTINGS
            sock.sendall(b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + bytes(9))
        try:
            out[name] = sock.recv(64).hex()
        except ConnectionResetError:
            out[name] = ""
print(json.dumps(out))
"""


def _client(ports: dict[str, int], as_user: int | None) -> dict[str, str]:
    python = "/usr/bin/python3" if as_user is not None else sys.executable
    result = subprocess.run(
        [python, "-c", CLIENT, json.dumps(ports)],
        user=as_user, group=as_user, extra_groups=[] if as_user is not None else None,
        cwd="/", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no /usr/bin/python3")
def test_only_the_listeners_own_user_is_served(library):
    env = {**os.environ, "LD_PRELOAD": str(library)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVING], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())
        nobody = 65534
        assert _client(ports, nobody) == dict.fromkeys(ports, "")  # closed, not a byte
        served = _client(ports, None)  # the listener's own user, after the refusals
        assert served["v4"] == served["v6"] == b"hi".hex(), served
        assert served["grpc"], served  # the server's HTTP/2 frames
    finally:
        proc.kill()
        _, errors = proc.communicate(timeout=10)
    assert errors.count("closed a connection from a process of another user") == 1, errors
