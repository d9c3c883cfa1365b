"""Network isolation (`docker run --network none`, as SageMaker runs EnableNetworkIsolation
models): code/lib's modules import, and a code/requirements.txt that needs the network fails
start-up with pip's own message in the container's log."""

from __future__ import annotations

import json

import user_code
from containers import START_TIMEOUT, Container, running

# GET /ping and POST /invocations from inside the container (no port can be published)
CLIENT = r"""
import json, sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[1])
while True:
    try:
        with urllib.request.urlopen("http://127.0.0.1:8080/ping", timeout=2) as reply:
            if reply.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("no /ping 200")
    time.sleep(0.5)
request = urllib.request.Request(
    "http://127.0.0.1:8080/invocations", data=sys.argv[2].encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=60) as reply:
    print(reply.read().decode())
"""


def test_code_lib_works_without_a_network(engine, image, tmp_path):
    root = user_code.with_code_and_lib(tmp_path)
    with running(engine, image, root, ready=False, network_mode="none") as container:
        code, output = container.exec(
            "python3", "-c", CLIENT, str(START_TIMEOUT), json.dumps({"x": [1.0, 2.0]})
        )
        assert code == 0, output + container.logs()[-3000:]
        assert json.loads(output.strip().splitlines()[-1]) == {
            "y": [4.0, 5.0],
            "handled_by": "inference.py",
        }
        code, output = container.exec(
            "python3", "-c", "import socket; socket.create_connection(('pypi.org', 443), 5)"
        )
        assert code != 0  # there is no network indeed


def test_requirements_txt_fails_start_up_with_pips_message(engine, image, tmp_path):
    root = user_code.with_requirements(tmp_path, "six==1.16.0")
    container = Container(engine, image, root, network_mode="none")
    try:
        code = container.wait_exit(START_TIMEOUT)
        logs = container.logs()
    finally:
        container.remove()
    assert code != 0, logs[-3000:]
    assert "No matching distribution found for six==1.16.0" in logs, logs[-3000:]
    assert "requirements.txt" in logs
