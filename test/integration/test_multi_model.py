"""Multi-model endpoints through the whole native stack: the /models API, invocations, hostile
names, concurrency across two gunicorn workers, a crashed model server, memory."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import orjson
import psutil
import pytest
import requests

from conftest import command_line, make_wheel, serve_stack, settled_counts, tiny_wheel
from raw_http import chunked_post, padded_tfs_request, split_reply
from raw_http import raw as raw_exchange

MME = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_GUNICORN_WORKERS": "2"}
INFERENCE = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return b'{"handled_by": "%s", "tfs": ' + response.content + b"}", "application/json"
"""


TINYPKG_INFERENCE = """
import tinypkg  # from the model's own requirements.txt, installed at load


def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return b'{"tinypkg": %d}' % tinypkg.VALUE, "application/json"
"""


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    """m0..m19: copies of half_plus_three (the SavedModel under <url>/<name>/1, as SageMaker
    unpacks a model.tar.gz); `coded` with its own inference.py; `broken`: a version whose
    SavedModel does not load; `empty`: no version at all."""
    import example_models as em

    root = tmp_path_factory.mktemp("mme_models")
    template = root / "template"
    em.half_plus_three_tf1(template / "half_plus_three", versions=(1,))
    for i in range(20):
        shutil.copytree(template, root / f"m{i}" / "model")
    shutil.copytree(template, root / "coded")
    (root / "coded" / "code").mkdir()
    (root / "coded" / "code" / "inference.py").write_text(INFERENCE % "coded")
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    (root / "empty").mkdir()
    shutil.copytree(template, root / "reqs")
    (root / "reqs" / "code").mkdir()
    (root / "reqs" / "code" / "inference.py").write_text(TINYPKG_INFERENCE)
    tiny_wheel(root / "reqs" / "code" / "wheelhouse")
    (root / "reqs" / "code" / "requirements.txt").write_text("tinypkg==1.0\n")
    shutil.copytree(template, root / "badreqs")
    (root / "badreqs" / "code").mkdir()
    (root / "badreqs" / "code" / "requirements.txt").write_text("no-such-package-anywhere==9\n")
    for name, package in (("dangling", "gone"), ("traversal", "evil")):
        shutil.copytree(template, root / name)
        wheels = root / name / "code" / "wheelhouse"
        make_wheel(wheels, "evil", "1.0", {"../../../../evil.py": "X = 1\n"})
        (wheels / "gone-1.0-py3-none-any.whl").symlink_to("nowhere.whl")  # leads nowhere
        (wheels / "loop-1.0-py3-none-any.whl").symlink_to("loop-1.0-py3-none-any.whl")
        (root / name / "code" / "requirements.txt").write_text(f"{package}==1.0\n")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(INFERENCE % "universal")
    shutil.rmtree(template)
    return root


@pytest.fixture(scope="module")
def mme(model_root, tmp_path_factory):
    stack = tmp_path_factory.mktemp("mme_stack")
    with serve_stack(model_root, stack, MME, instances=2) as server:
        yield server


def load(server, name: str, url: str) -> requests.Response:
    return requests.post(f"{server.url}/models", json={"model_name": name, "url": url}, timeout=120)


def path(name: str) -> str:
    return "/models/" + quote(name, safe="")


def invoke(server, name: str, body: str = '{"instances": [1.0, 2.0]}') -> requests.Response:
    return requests.post(f"{server.url}{path(name)}/invoke", data=body, timeout=60)


def unload(server, name: str) -> requests.Response:
    return requests.delete(f"{server.url}{path(name)}", timeout=120)


def listed(server) -> dict[str, str]:
    models, token = {}, None
    while True:
        params = {"limit": 3, **({"next_page_token": token} if token else {})}
        doc = requests.get(f"{server.url}/models", params=params, timeout=10).json()
        models.update({m["modelName"]: m["modelUrl"] for m in doc["models"]})
        token = doc.get("nextPageToken")
        if token is None:
            return models


def test_lifecycle(mme, model_root):
    assert requests.get(f"{mme.url}/ping", timeout=5).status_code == 200
    reply = load(mme, "life", str(model_root / "m0"))
    assert reply.status_code == 200, reply.text
    # the AWS container's texts, so scripts matching on them keep working
    assert reply.json()["success"].startswith("Successfully loaded model life, listening on ")
    url = str(model_root / "m0")
    assert listed(mme)["life"] == url
    got = requests.get(f"{mme.url}/models/life", timeout=10)
    assert got.json() == {"modelName": "life", "modelUrl": url}
    # no code of its own: the universal code dir's handlers
    assert invoke(mme, "life").json() == {
        "handled_by": "universal",
        "tfs": {"predictions": [3.5, 4.0]},
    }
    again = load(mme, "life", url)
    assert again.status_code == 409 and again.json()["error"] == "Model life is already loaded."
    gone = unload(mme, "life")
    assert gone.status_code == 200
    assert gone.json() == {"success": "Successfully unloaded model life."}
    not_loaded = "Model life is not loaded yet."
    assert (invoke(mme, "life").status_code, invoke(mme, "life").json()["error"]) == (
        404,
        not_loaded,
    )
    got = requests.get(f"{mme.url}/models/life", timeout=10)
    assert (got.status_code, got.json()["error"]) == (404, not_loaded)
    again = unload(mme, "life")
    assert (again.status_code, again.json()["error"]) == (404, not_loaded)
    assert "life" not in listed(mme)


def test_a_models_own_code_wins(mme, model_root):
    assert load(mme, "coded", str(model_root / "coded")).status_code == 200
    assert invoke(mme, "coded").json()["handled_by"] == "coded"
    assert unload(mme, "coded").status_code == 200


def test_a_models_requirements_are_installed_at_load(mme, model_root):
    assert load(mme, "reqs", str(model_root / "reqs")).status_code == 200
    assert invoke(mme, "reqs").json() == {"tinypkg": 42}
    assert unload(mme, "reqs").status_code == 200
    reply = load(mme, "badreqs", str(model_root / "badreqs"))
    assert reply.status_code == 400 and "pip install" in reply.json()["error"], reply.text
    assert "badreqs" not in listed(mme)


def test_load_errors_name_no_internal_path_and_keep_the_url_as_sent(mme, model_root):
    """A missing url comes back in the AWS container's words with the url as the client sent
    it; pip's refusals (a link in the wheelhouse that leads nowhere or loops, a wheel writing
    outside its environment) are 400s naming the model's files relative to it and no folder
    of the run directory."""
    url = str(model_root / "non-existing")
    missing = load(mme, "non-existing", url)
    assert missing.status_code == 404
    assert (
        missing.json()["error"] == f"Could not find valid base path {url} for servable non-existing"
    )
    for name, said in (
        ("dangling", "No such file or directory: 'code/wheelhouse/gone-1.0-py3-none-any.whl'"),
        ("traversal", "outside the target directory 'site-packages'"),
    ):
        reply = load(mme, name, name)
        assert reply.status_code == 400 and said in reply.json()["error"], reply.text
        assert str(model_root) not in reply.text and str(mme.run_dir) not in reply.text
        assert name not in listed(mme)


def test_metrics_count_the_api_and_its_errors_once(mme, model_root):
    """Every answer of the multi-model API, its 4xx too, counted once by route, status and the
    model the request names."""
    name = "counted model"
    keys = {
        ("/models", 200, ""): 1,  # the load
        ("/models", 409, ""): 1,
        ("/models", 404, "counted-nope"): 1,
        ("/models", 200, name): 1,  # the unload
        ("/invocations", 200, name): 2,
        ("/invocations", 404, "counted-nope"): 1,
        ("/invocations", 400, ""): 1,
    }
    before = settled_counts(mme.url, list(keys))
    assert load(mme, name, str(model_root / "m2")).status_code == 200
    assert load(mme, name, str(model_root / "m2")).status_code == 409
    assert requests.get(f"{mme.url}{path('counted-nope')}", timeout=10).status_code == 404
    assert [invoke(mme, name).status_code for _ in range(2)] == [200, 200]
    assert invoke(mme, "counted-nope").status_code == 404
    assert requests.post(f"{mme.url}/invocations", data="{}", timeout=10).status_code == 400
    assert unload(mme, name).status_code == 200
    expected = [b + n for b, n in zip(before, keys.values(), strict=True)]
    assert settled_counts(mme.url, list(keys)) == expected


@pytest.mark.parametrize("name", ["a/b/c", "..a", "über model", "x" * 300, "a%2Fb", "m.tar.gz"])
def test_names_are_opaque(mme, model_root, name):
    assert load(mme, name, str(model_root / "m1")).status_code == 200
    assert requests.get(f"{mme.url}{path(name)}", timeout=10).json()["modelName"] == name
    assert invoke(mme, name).json()["tfs"] == {"predictions": [3.5, 4.0]}
    assert unload(mme, name).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"model_name": "x", "url": "/etc"}, 400, "outside the model directory"),
        ({"model_name": "x", "url": "../.."}, 400, "outside the model directory"),
        ({"model_name": "x", "url": "m0/../../.."}, 400, "outside the model directory"),
        (
            {"model_name": "x", "url": "nope"},
            404,
            "Could not find valid base path nope for servable x",
        ),
        (
            {"model_name": "x", "url": "empty"},
            404,
            "Could not find valid base path empty for servable x",
        ),
        ({"model_name": "x\n", "url": "m0"}, 400, "control characters"),
        ({"model_name": "../../etc/passwd", "url": "m0"}, 400, "tries to leave"),
        ({"model_name": "a/../b", "url": "m0"}, 400, "tries to leave"),
        ({"model_name": "..", "url": "m0"}, 400, "tries to leave"),
        ({"model_name": "a\\..\\b", "url": "m0"}, 400, "tries to leave"),
        ({"model_name": "", "url": "m0"}, 400, "non-empty"),
        ({"url": "m0"}, 400, "Missing model_name"),
        ({"model_name": 7, "url": "m0"}, 400, "strings"),
        ([1, 2], 400, "JSON object"),
    ],
)
def test_bad_load_requests_are_4xx_json(mme, body, status, fragment):
    reply = requests.post(f"{mme.url}/models", json=body, timeout=30)
    assert reply.status_code == status, reply.text
    assert fragment in reply.json()["error"]


def test_bad_json_limit_and_token_are_400(mme):
    reply = requests.post(f"{mme.url}/models", data=b"{nope", timeout=30)
    assert reply.status_code == 400 and "not valid JSON" in reply.json()["error"]
    for params in ({"limit": "0"}, {"limit": "x"}, {"next_page_token": "abc"}):
        assert requests.get(f"{mme.url}/models", params=params, timeout=10).status_code == 400


def test_load_by_query_parameters_and_invocations_is_400(mme, model_root):
    reply = requests.post(
        f"{mme.url}/models",
        params={"model_name": "q", "url": str(model_root / "m2")},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    assert unload(mme, "q").status_code == 200
    reply = requests.post(f"{mme.url}/invocations", data="1.0", timeout=10)
    assert reply.status_code == 400 and "/models/<name>/invoke" in reply.json()["error"]


def test_a_model_that_fails_to_load_leaves_nothing_behind(mme, model_root):
    reply = load(mme, "broken", str(model_root / "broken"))
    assert reply.status_code == 500, reply.text
    assert "broken" in reply.json()["error"] or "load" in reply.json()["error"]
    assert "broken" not in listed(mme)
    assert invoke(mme, "broken").status_code == 404
    assert load(mme, "after-broken", str(model_root / "m3")).status_code == 200
    assert invoke(mme, "after-broken").status_code == 200
    assert unload(mme, "after-broken").status_code == 200


def test_two_simultaneous_loads_of_one_model_give_one_200_and_one_409(mme, model_root):
    barrier = threading.Barrier(2)

    def attempt() -> int:
        barrier.wait()
        return load(mme, "twice", str(model_root / "m4")).status_code

    with ThreadPoolExecutor(2) as pool:
        statuses = sorted(pool.map(lambda _: attempt(), range(2)))
    assert statuses == [200, 409]
    assert unload(mme, "twice").status_code == 200


def test_fifty_concurrent_mixed_operations_over_ten_models(mme, model_root):
    names = [f"c{i}" for i in range(10)]
    rng = random.Random(7)
    operations = [(rng.choice(["load", "unload", "invoke", "get"]), rng.choice(names))
                  for _ in range(50)]  # fmt: skip
    allowed = {"load": {200, 409}, "unload": {200, 404}, "invoke": {200, 404}, "get": {200, 404}}

    def run(op: tuple[str, str]) -> tuple[str, int, str]:
        kind, name = op
        i = names.index(name)
        if kind == "load":
            reply = load(mme, name, str(model_root / f"m{i}"))
        elif kind == "unload":
            reply = unload(mme, name)
        elif kind == "invoke":
            reply = invoke(mme, name)
        else:
            reply = requests.get(f"{mme.url}/models/{name}", timeout=30)
        return kind, reply.status_code, reply.text

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, operations))
    for kind, status, text in results:
        assert status in allowed[kind], (kind, status, text)
    # one consistent view: list, get and invoke agree for every model, from any worker
    loaded = set(listed(mme))
    for name in names:
        for _ in range(2):  # two workers: ask more than once
            get = requests.get(f"{mme.url}/models/{name}", timeout=10).status_code
            assert get == (200 if name in loaded else 404)
            assert invoke(mme, name).status_code == get
    for name in loaded:
        assert unload(mme, name).status_code == 200


def raw(server, data: bytes) -> tuple[int, bytes, bytes]:
    """One raw HTTP exchange with the front door: (status, head, body)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(data)
        reply = b""
        while True:
            head, sep, body = reply.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if sep and length and len(body) >= int(length.group(1)):
                break
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    return int(head.split(b" ", 2)[1]), head, body


def test_what_nginx_passes_on_gunicorn_takes(mme):
    # request lines of 4-8 KB and more than 100 headers (gunicorn's defaults: 414, 431)
    reply = requests.get(f"{mme.url}/models", params={"x": "a" * 7000}, timeout=10)
    assert reply.status_code == 200, reply.text
    longest = "/models?x=" + "a" * (8190 - len("GET  HTTP/1.1") - len("/models?x="))
    status, head, body = raw(mme, f"GET {longest} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 200, (head, body)  # the longest request line nginx's buffers hold
    headers = {f"X-Header-{i}": "v" for i in range(150)}
    reply = requests.get(f"{mme.url}/models", headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZ /models HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /models HTTP/1.1\r\nHost: x\r\nAccept: a\x01b\r\n\r\n",
    ],
)
def test_what_gunicorn_refuses_is_json_at_the_front_door(mme, request_bytes):
    """(nginx refuses control characters in the headers it passes on, and passes no other)"""
    status, head, body = raw(mme, request_bytes)
    assert 400 <= status < 500, head
    assert b"content-type: application/json" in head.lower(), head
    assert orjson.loads(body)["error"]


@pytest.mark.parametrize(
    ("target", "allowed"), [("/models", "GET, POST"), ("/models/a", "GET, HEAD, DELETE")]
)
def test_options_is_405_json(mme, target, allowed):
    reply = requests.options(f"{mme.url}{target}", timeout=10)
    assert reply.status_code == 405 and reply.json()["error"]
    assert sorted(reply.headers["Allow"].split(", ")) == sorted(allowed.split(", "))


@pytest.mark.parametrize("extra", [0, 1], ids=["at_the_limit", "one_byte_over"])
def test_a_chunked_invoke_is_served_up_to_the_limit_and_413_json_past_it(mme, model_root, extra):
    """Streamed in 16 KiB chunks to exactly the default body limit: served; a byte more: 413."""
    name = f"streamed-{extra}"
    assert load(mme, name, str(model_root / "m19")).status_code == 200
    try:
        body = padded_tfs_request(100 * 1024 * 1024 + extra)
        data = chunked_post(f"{path(name)}/invoke", body, "application/json", 16384)
        status, headers, answer = split_reply(raw_exchange(mme.port, data, timeout=120))
    finally:
        assert unload(mme, name).status_code == 200
    assert headers["content-type"] == "application/json", answer[:300]
    if extra:
        assert status == 413, answer[:300]
        assert orjson.loads(answer)["error"].startswith("Payload Too Large: the request body is")
    else:
        assert status == 200, answer[:300]
        assert orjson.loads(answer)["tfs"]["predictions"] == [3.5, 4.0]


def test_a_load_url_over_255_characters_is_400_json(mme):
    reply = requests.post(
        f"{mme.url}/models", json={"model_name": "long", "url": "m" * 300}, timeout=30
    )
    assert reply.status_code == 400, reply.text
    assert "not a usable path" in reply.json()["error"]


NOBODY_SCRIPT = """
import json, socket, sys
doc = json.loads(sys.argv[1])
out = {"tcp": {}, "unix": {}, "files": {}}
for port in doc["tcp"]:  # a model server's REST or gRPC port: is anything ever answered?
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /v1/models/x HTTP/1.0\\r\\n\\r\\n")
            out["tcp"][port] = sock.recv(4096).decode(errors="replace")
    except OSError:  # refused or reset: not a byte either
        out["tcp"][port] = ""
for path in doc["unix"]:  # the service's socket, the handler processes' sockets
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(path)
            sock.sendall(b"DELETE /models/" + doc["name"].encode() + b" HTTP/1.0\\r\\n\\r\\n")
            out["unix"][path] = sock.recv(4096).decode(errors="replace") or "connected"
    except OSError as exc:
        out["unix"][path] = repr(exc)
for path in doc["files"]:
    for mode in ("r", "a"):
        try:
            open(path, mode).close()
            out["files"][path + " " + mode] = "opened"
        except OSError as exc:
            out["files"][path + " " + mode] = repr(exc)
print(json.dumps(out))
"""


def _as_nobody() -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


def stack_sockets(server, pool_dirs: list[str]) -> tuple[set[int], set[int], set[str]]:
    """The TCP ports, UDP ports and unix socket paths serve's processes listen on (the
    handler pools a load started, detached, included)."""
    root = psutil.Process(server.proc.pid)
    processes = [root, *root.children(recursive=True)]
    for proc in psutil.process_iter(["cmdline"]):
        if any(d in " ".join(proc.info["cmdline"] or []) for d in pool_dirs):
            processes.append(proc)
    tcp, udp, unix = set(), set(), set()
    for proc in processes:
        try:
            for conn in proc.net_connections(kind="all"):
                if conn.family == socket.AF_UNIX:
                    if conn.laddr and not conn.laddr.startswith("\0"):
                        unix.add(conn.laddr)
                elif conn.type == socket.SOCK_STREAM and conn.status == psutil.CONN_LISTEN:
                    tcp.add(conn.laddr.port)
                elif conn.type == socket.SOCK_DGRAM:
                    udp.add(conn.laddr.port)
        except psutil.NoSuchProcess:
            continue
    return tcp, udp, unix


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as nobody")
def test_another_local_user_reaches_nothing_but_nginx(mme, model_root):
    """serve as root, another local user (nobody, as nginx's workers used to run): every port
    and socket the stack opens but nginx's refuses it. The model servers close its TCP
    connections at accept (it could otherwise load a SavedModel of its own through gRPC's
    HandleReloadConfigRequest and run its ops as root), the sockets are in 0700 directories,
    the stack opens no UDP port, and the pipe nginx counts requests through is not another
    user's to open (through /proc)."""
    assert load(mme, "guarded", str(model_root / "m7")).status_code == 200
    assert load(mme, "guarded-pool", str(model_root / "reqs")).status_code == 200
    try:
        records = (mme.run_dir / "multi-model" / "pools").iterdir()
        pool_dirs = [orjson.loads(r.read_bytes())["pool"] for r in records]
        tcp, udp, unix = stack_sockets(mme, pool_dirs)
        assert mme.port in tcp and len(tcp) >= 5, tcp  # nginx, 2 x (gRPC, REST)
        assert unix and not udp, (unix, udp)
        conf = mme.run_dir / "nginx.conf"
        fd = re.search(r'access_log "/dev/fd/(\d+)" sagemaker_counts', conf.read_text()).group(1)
        masters = [p for p in psutil.Process(mme.proc.pid).children() if p.name() == "nginx"]
        pipe = [f"/proc/{pid}/fd/{fd}" for pid in (mme.proc.pid, masters[0].pid)]
        doc = {
            "tcp": sorted(tcp - {mme.port}),
            "unix": sorted(unix),
            "files": [str(conf), *pipe],
            "name": "guarded",
        }
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        result = subprocess.run(
            [python, "-c", textwrap.dedent(NOBODY_SCRIPT), orjson.dumps(doc).decode()],
            preexec_fn=_as_nobody, cwd="/", capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        outcome = orjson.loads(result.stdout)
        answered = {port: text for port, text in outcome["tcp"].items() if text}
        assert not answered, answered  # not a byte from any model server port
        for path, text in outcome["unix"].items():
            assert "PermissionError" in text, (path, text)
        for what, text in outcome["files"].items():
            assert "PermissionError" in text, (what, text)
        # the stack's own user is served as before
        assert invoke(mme, "guarded").status_code == 200
        assert invoke(mme, "guarded-pool").status_code == 200
    finally:
        assert unload(mme, "guarded").status_code == 200
        assert unload(mme, "guarded-pool").status_code == 200


def _pool_dir(server, name: str) -> Path:
    registry = orjson.loads((server.run_dir / "multi-model" / "models.json").read_bytes())
    (model,) = [m for m in registry["models"] if m["name"] == name]
    return Path(model["handlers"])


def test_a_models_socket_taken_over_by_another_models_pool_is_detected(mme, model_root):
    """One model's handler processes answering another's clients (their socket put in its
    place, as a bug could): the call is refused (503), never answered by the wrong model, and
    the model gets new handler processes."""
    for name in ("victim", "intruder"):
        assert load(mme, name, str(model_root / "reqs")).status_code == 200
    try:
        victim, intruder = _pool_dir(mme, "victim"), _pool_dir(mme, "intruder")
        os.replace(intruder / "socket", victim / "socket")
        statuses = [invoke(mme, "victim").status_code for _ in range(4)]  # each gunicorn worker
        assert 503 in statuses and set(statuses) <= {200, 503}, statuses
        assert "was answered by process" in mme.log()
        deadline = time.monotonic() + 60
        while invoke(mme, "victim").status_code != 200:
            assert time.monotonic() < deadline, "the model did not get its processes back"
            time.sleep(0.2)
        assert _pool_dir(mme, "victim") != victim
    finally:
        for name in ("victim", "intruder"):
            unload(mme, name)


def test_an_environment_changed_after_it_was_made_is_made_again(mme, model_root, tmp_path):
    """A model's code left a .pth in its environment (every interpreter there runs it at
    start): the environment, kept after the unload, is made again at the next load instead of
    being used with it."""
    assert load(mme, "poisoned", str(model_root / "reqs")).status_code == 200
    registry = orjson.loads((mme.run_dir / "multi-model" / "models.json").read_bytes())
    (model,) = [m for m in registry["models"] if m["name"] == "poisoned"]
    (site_packages,) = Path(model["environment"], "venv", "lib").glob("python3*/site-packages")
    marker = tmp_path / "ran"
    (site_packages / "zz_left_behind.pth").write_text(
        f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n"
    )
    assert unload(mme, "poisoned").status_code == 200
    assert load(mme, "poisoned", str(model_root / "reqs")).status_code == 200
    try:
        assert invoke(mme, "poisoned").json() == {"tinypkg": 42}
        assert not marker.exists(), "the environment was used with what was left in it"
        assert "changed since it was made" in mme.log()
    finally:
        unload(mme, "poisoned")


def test_a_restarted_serve_with_the_same_run_dir_starts_with_no_models(tmp_path_factory):
    """No registry from an earlier run: its model servers loaded none of those models.
    (No code/ here: invocations take the built-in formats.)"""
    import example_models as em

    root = tmp_path_factory.mktemp("mme_plain")
    em.half_plus_three_tf1(root / "plain" / "model", versions=(1,))
    stack = tmp_path_factory.mktemp("mme_restart")
    with serve_stack(root, stack, MME) as server:
        assert load(server, "kept", "plain").status_code == 200
        assert invoke(server, "kept").status_code == 200
        reply = invoke(server, "kept", "[" * 100_000 + "]" * 100_000)
        assert reply.status_code == 400 and reply.json()["error"], reply.text
    with serve_stack(root, stack, MME) as server:  # the same --run-dir
        assert listed(server) == {}
        assert invoke(server, "kept").status_code == 404
        assert load(server, "kept", "plain").status_code == 200, "no 409 from the last run"
        assert invoke(server, "kept").json() == {"predictions": [3.5, 4.0]}


def _model_server_rss(server) -> int:
    children = psutil.Process(server.proc.pid).children(recursive=True)
    return sum(p.memory_info().rss for p in children if "model-server" in command_line(p))


HEAVY_MB = 40  # above glibc's largest mmap threshold (32 MiB): malloc'd, it goes back at free
CYCLE = 10  # models per load/unload cycle


@pytest.fixture(scope="module")
def heavy_root(model_root) -> Path:
    """h0..h29 under the model root: SavedModels holding 40 MB of weights each (hard links)."""
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(tf.random.uniform([HEAVY_MB * 250_000], seed=1))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(x):
        return {"y": x + tf.reduce_sum(module.w[:4])}

    first = model_root / "h0" / "model" / "1"
    tf.saved_model.save(module, str(first), signatures={"serving_default": serve})
    for i in range(1, 3 * CYCLE):
        shutil.copytree(model_root / "h0", model_root / f"h{i}", copy_function=os.link)
    return model_root


@pytest.mark.parametrize("onednn", ["0", "1"])
def test_unloaded_memory_returns_and_cycles_do_not_grow(heavy_root, tmp_path, onednn):
    """Three cycles each load then unload 10 other models of 40 MB, with oneDNN forced off
    and on: on, TF's CPU allocator pools every block unless TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1,
    which serve sets for multi-model model servers (oneDNN is on by default only on some
    CPUs)."""
    env = {**MME, "TF_ENABLE_ONEDNN_OPTS": onednn}
    with serve_stack(heavy_root, tmp_path, env) as server:
        assert load(server, "warm", str(heavy_root / "h0")).status_code == 200
        assert invoke(server, "warm", '{"instances": [1.0]}').status_code == 200
        assert unload(server, "warm").status_code == 200
        baseline, peaks, afters = _model_server_rss(server), [], []
        for cycle in range(3):
            names = [f"h{cycle * CYCLE + i}" for i in range(CYCLE)]
            for name in names:
                assert load(server, name, str(heavy_root / name)).status_code == 200
            peaks.append(_model_server_rss(server))
            for name in names:
                assert unload(server, name).status_code == 200
            afters.append(_model_server_rss(server))
    mib = [x >> 20 for x in (baseline, *peaks, *afters)]
    print(f"\nTF_ENABLE_ONEDNN_OPTS={onednn} model server RSS MiB: after warm-up {mib[0]}, "
          f"loaded {mib[1:4]}, unloaded {mib[4:]}")  # fmt: skip
    grown = peaks[0] - baseline
    assert grown > 0.75 * CYCLE * (HEAVY_MB << 20), mib  # the weights were really loaded
    for value in (*peaks[1:], *afters):  # later cycles reuse what the first one took
        assert value <= peaks[0] + 0.1 * grown, mib
    for after in afters:  # and unloading gives the weights back
        assert after - baseline <= 0.25 * grown, mib


def test_not_enough_memory_is_507_and_leaves_nothing(model_root, tmp_path_factory):
    env = {**MME, "SAGEMAKER_MME_MEMORY_RESERVE_MB": str(1 << 30)}
    with serve_stack(model_root, tmp_path_factory.mktemp("mme_507"), env) as server:
        reply = load(server, "big", str(model_root / "m0"))
        assert reply.status_code == 507, reply.text
        assert "Not enough memory" in reply.json()["error"]
        assert listed(server) == {}


def test_a_killed_model_server_unloads_its_models(model_root, tmp_path_factory):
    with serve_stack(model_root, tmp_path_factory.mktemp("mme_crash"), MME) as server:
        assert load(server, "survivor", str(model_root / "m5")).status_code == 200
        assert invoke(server, "survivor").status_code == 200
        (victim,) = [
            p
            for p in psutil.Process(server.proc.pid).children(recursive=True)
            if "model-server" in command_line(p)
        ]
        os.kill(victim.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and invoke(server, "survivor").status_code != 404:
            time.sleep(0.2)
        assert invoke(server, "survivor").status_code == 404
        assert listed(server) == {}
        # SageMaker loads it again once the model server is back
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reply = load(server, "survivor", str(model_root / "m5"))
            if reply.status_code == 200:
                break
            time.sleep(0.5)
        assert reply.status_code == 200, reply.text
        assert invoke(server, "survivor").status_code == 200


def test_universal_code_from_s3(model_root, tmp_path_factory, s3_url, monkeypatch):
    import boto3

    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_url}  # fmt: skip
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="code-bucket")
    s3.put_object(Bucket="code-bucket", Key="shared/code/inference.py", Body=INFERENCE % "from-s3")
    env = {
        **MME,
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "code-bucket",
        "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "shared/code",
    }
    with serve_stack(model_root, tmp_path_factory.mktemp("mme_s3"), env) as server:
        assert load(server, "s3", str(model_root / "m6")).status_code == 200
        assert invoke(server, "s3").json()["handled_by"] == "from-s3"
