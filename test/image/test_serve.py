"""`docker run IMAGE serve` with the model read-only at /opt/ml/model: the fast path, user code,
who runs and what listens, and `docker stop` under load."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import requests
import user_code
from containers import Container, is_loopback, running

LABELS = (
    "com.amazonaws.sagemaker.capabilities.accept-bind-to-port",
    "com.amazonaws.sagemaker.capabilities.multi-models",
)
IMAGE_USER = "1000"
MODEL_SERVER = re.compile(r"^(tfs-model-serve|tensorflow_model)")  # 15-character names


@pytest.fixture(scope="module")
def fast_path(engine, image, tmp_path_factory):
    """half_plus_three, no user code: nginx answers from its njs fast path."""
    root = user_code.half_plus_three(tmp_path_factory.mktemp("opt_ml_model"))
    with running(engine, image, root) as container:
        yield container


@pytest.fixture(scope="module")
def with_code(engine, image, tmp_path_factory):
    """half_plus_three with code/inference.py and code/lib: all three processes run."""
    root = user_code.with_code_and_lib(tmp_path_factory.mktemp("opt_ml_model_code"))
    with running(engine, image, root) as container:
        yield container


def post(url: str, body: str | bytes, content_type: str, accept: str | None = None, **headers):
    headers = {"Content-Type": content_type, **headers}
    if accept:
        headers["Accept"] = accept
    return requests.post(f"{url}/invocations", data=body, headers=headers, timeout=60)


def test_image_declares_sagemaker_capabilities_user_and_command(engine, image):
    config = engine.images.get(image).attrs["Config"]
    for label in LABELS:
        assert config["Labels"].get(label) == "true", config["Labels"]
    assert config["User"] == f"{IMAGE_USER}:{IMAGE_USER}"
    assert config["Cmd"] == ["serve"] and not config.get("Entrypoint")
    assert "8080/tcp" in config["ExposedPorts"]


def test_ping_is_200_with_an_empty_body(fast_path):
    reply = requests.get(f"{fast_path.url}/ping", timeout=2)
    assert reply.status_code == 200
    assert reply.content == b""


def test_json(fast_path):
    reply = post(fast_path.url, '{"instances": [1.0, 2.0, 5.0]}', "application/json")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"predictions": [3.5, 4.0, 5.5]}


def test_csv_with_custom_attributes(fast_path):
    reply = post(
        fast_path.url,
        "1.0\r\n2\r\n5.0",
        "text/csv",
        accept="text/csv",
        **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=1"},
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == "text/csv"
    assert reply.text == "3.5\n4.0\n5.5\n"


def test_json_lines(fast_path):
    reply = post(
        fast_path.url, "1.0\n2.0\n\n5.0\n", "application/jsonlines", "application/jsonlines"
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["Content-Type"] == "application/jsonlines"
    assert reply.text == "3.5\n4.0\n5.5\n"


def test_bad_input_is_a_json_4xx(fast_path):
    reply = post(fast_path.url, "1.0,abc\n", "text/csv")
    assert 400 <= reply.status_code < 500, reply.text
    assert "error" in reply.json()


def test_model_directory_is_read_only(fast_path):
    code, output = fast_path.exec("touch", "/opt/ml/model/written")
    assert code != 0 and "Read-only file system" in output, output


def test_inference_py_with_code_lib(with_code):
    reply = post(with_code.url, json.dumps({"x": [1.0, 2.0]}), "application/json")
    assert reply.status_code == 200, reply.text
    # code/lib's scaling doubles x: 0.5 * 2x + 3
    assert reply.json() == {"y": [4.0, 5.0], "handled_by": "inference.py"}


def test_every_process_runs_as_the_image_user(with_code):
    processes = with_code.processes()
    names = {name for _, name, _ in processes}
    assert {"serve", "nginx"} <= names, processes
    assert any(MODEL_SERVER.match(name) for name in names), names
    assert {uid for _, _, uid in processes} == {IMAGE_USER}, processes


def test_nothing_listens_beyond_the_loopback_but_the_front_port(with_code):
    """ss inside the container: the model server's gRPC and REST ports, the Python service's
    metrics socket, all on the loopback; nginx's 8080 alone on every interface."""
    listening = with_code.listening()
    tcp = [entry for entry in listening if entry[0] == "tcp"]
    assert len(tcp) >= 3, listening  # nginx, and the model server's gRPC and REST ports
    exposed = [entry for entry in listening if not is_loopback(entry[1])]
    assert exposed and all(proto == "tcp" and port == 8080 for proto, _, port in exposed), listening


# the first bytes each TCP port answers a request with ("" when it closed at once)
TCP_CLIENT = r"""
import json, socket, sys
out = {}
for port in json.loads(sys.argv[1]):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /v1/models/model HTTP/1.0\r\n\r\n")
            out[port] = sock.recv(64).decode(errors="replace")
    except OSError:
        out[port] = ""
print(json.dumps(out))
"""


def test_only_the_image_user_reaches_the_model_server(with_code):
    """Another user in the container (docker exec --user): the model server's ports close
    its connections at once (loopback_guard.so); the image's user is answered."""
    internal = sorted(
        {port for proto, _, port in with_code.listening() if proto == "tcp" and port != 8080}
    )
    assert len(internal) >= 2, internal  # the model server's gRPC and REST ports
    code, output = with_code.exec("python3", "-c", TCP_CLIENT, json.dumps(internal), user="65534")
    assert code == 0, output
    assert set(json.loads(output).values()) == {""}, output
    code, output = with_code.exec("python3", "-c", TCP_CLIENT, json.dumps(internal))
    assert code == 0 and any(json.loads(output).values()), output


def test_docker_stop_under_load_finishes_in_flight_requests(engine, image, tmp_path):
    """SIGTERM with requests in flight: each completes with 200, serve exits 0 before
    SageMaker's SIGKILL (docker stop -t 30)."""
    root = user_code.with_slow_handler(tmp_path)
    count = 4
    with running(engine, image, root) as container:
        replies: dict[int, requests.Response | Exception] = {}

        def send(i: int) -> None:
            try:
                replies[i] = post(
                    container.url, json.dumps({"id": i, "seconds": 3}), "application/json"
                )
            except Exception as exc:  # recorded and asserted below
                replies[i] = exc

        threads = [threading.Thread(target=send, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while container.logs().count("handler began request") < count:
            assert time.monotonic() < deadline, container.logs()[-3000:]
            time.sleep(0.1)
        code = container.stop(timeout=30)
        for thread in threads:
            thread.join(60)
        logs = container.logs()
    assert code == 0, logs[-3000:]
    for i in range(count):
        reply = replies[i]
        assert isinstance(reply, requests.Response), reply
        assert reply.status_code == 200 and reply.json() == {"id": i, "done": True}, reply.text
    assert "stopped" in logs


def test_serve_is_pid_1_and_a_dead_model_server_restarts(engine, image, tmp_path):
    """SIGKILL the model server: serve (PID 1) says so, restarts it, and /ping is 200 again."""
    root = user_code.half_plus_three(tmp_path)
    with running(engine, image, root) as container:
        code, comm = container.exec("cat", "/proc/1/comm")
        assert (code, comm.strip()) == (0, "serve")
        (pid,) = [pid for pid, name, _ in container.processes() if MODEL_SERVER.match(name)]
        assert container.exec("bash", "-c", f"kill -KILL {pid}")[0] == 0  # no procps here
        deadline = time.monotonic() + 60
        while "was killed by SIGKILL" not in container.logs():
            assert time.monotonic() < deadline, container.logs()[-3000:]
            time.sleep(0.2)
        container.wait_ready()
        reply = post(container.url, '{"instances": [1.0]}', "application/json")
        assert reply.json() == {"predictions": [3.5]}
        assert container.stop() == 0


def test_a_container_without_a_model_exits_with_a_clear_error(engine, image, tmp_path):
    (tmp_path / "empty").mkdir()
    container = Container(engine, image, tmp_path / "empty")
    try:
        code = container.wait_exit(120)
        logs = container.logs()
    finally:
        container.remove()
    assert code == 2, logs
    assert "cannot start" in logs and "SavedModel" in logs, logs[-2000:]


def test_build_secrets_left_nothing_in_the_image(fast_path):
    """pip's configuration and CA bundle were build secrets: no pip.conf, and none of this
    machine's own CA certificates (those beyond Debian's, such as a TLS-inspecting proxy's)
    anywhere in the image's files."""
    code, output = fast_path.exec("bash", "-c", "ls /etc/pip.conf /etc/xdg/pip /run/secrets 2>&1")
    assert "No such file" in output and code != 0, output
    host_bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if not host_bundle.is_file():
        return
    code, image_bundle = fast_path.exec("cat", "/etc/ssl/certs/ca-certificates.crt")
    assert code == 0
    extra = [
        block.splitlines()[1]  # a line of the certificate's base64 body
        for block in host_bundle.read_text().split("-----BEGIN CERTIFICATE-----")[1:]
        if block.splitlines()[1] not in image_bundle
    ]
    for line in extra:
        code, found = fast_path.exec(
            "grep", "-rlF", line, "/etc", "/opt", "/home", "/root", "/tmp", "/usr/local", "/var",
            user="0",  # every file, /etc/shadow too
        )  # fmt: skip
        assert code == 1 and found == "", found


def test_a_tflite_model_is_served_with_the_model_server_s_flag(engine, image, tmp_path):
    """SAGEMAKER_TFS_MODEL_SERVER_FLAGS=--prefer_tflite_model=true: the version's model.tflite
    answers, not the SavedModel beside it (half_plus_three's TFLite model beside
    half_plus_two's SavedModel tells which one did)."""
    import shutil

    import example_models as em

    em.half_plus_three_tflite(tmp_path / "tflite" / "m")
    em.half_plus_two_tf2(tmp_path / "model" / "m")
    shutil.copy(tmp_path / "tflite/m/1/model.tflite", tmp_path / "model/m/1/model.tflite")
    env = {"SAGEMAKER_TFS_MODEL_SERVER_FLAGS": "--prefer_tflite_model=true"}
    body = {"instances": [1.0, 2.0, 5.0]}
    for flags, answer in ((env, [3.5, 4.0, 5.5]), ({}, [2.5, 3.0, 4.5])):
        with running(engine, image, tmp_path / "model", env=flags) as container:
            reply = requests.post(f"{container.url}/invocations", json=body, timeout=60)
            assert (reply.status_code, reply.json()) == (200, {"predictions": answer})
