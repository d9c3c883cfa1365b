"""serve's lifetime: nothing it started outlives it, SIGTERM ends it within SageMaker's budget
with in-flight requests answered, and a normal start logs no error."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from conftest import serve_stack
from sagemaker_serving.serve import SHUTDOWN_BUDGET_SECONDS

SAGEMAKER_KILL_SECONDS = 30  # SageMaker sends SIGKILL this long after SIGTERM

# sleeps as long as the request says: {"sleep": seconds}
SLEEPY_HANDLER = """
import json
import logging
import time

log = logging.getLogger("inference")


def input_handler(data, context):
    seconds = json.loads(data.read())["sleep"]
    log.info("sleeping %ss", seconds)
    time.sleep(seconds)
    return json.dumps({"instances": [1.0]})


def output_handler(response, context):
    return response.content, "application/json"
"""

# an error of nginx ([error] and worse), Python's logging (text format), our model server,
# TensorFlow's C++ logging (absl: E0000 ...)
ERROR_LINE = re.compile(
    r"\[(error|crit|alert|emerg)\]"
    r"|^\S+ \S+ (ERROR|CRITICAL) "
    r"|^\S+ \S+: [EF] "
    r"|^[EF]\d{4} "
)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("lifecycle_models")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    return root


@pytest.fixture(scope="module")
def models_with_code(tmp_path_factory) -> Path:
    import example_models as em

    root = tmp_path_factory.mktemp("lifecycle_code")
    em.half_plus_three_tf1(root / "half_plus_three", versions=(1,))
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(SLEEPY_HANDLER)
    return root


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _port_free(port: int) -> bool:
    """Nobody listens on 127.0.0.1:port: connect is refused and bind succeeds."""
    with socket.socket() as probe:
        probe.settimeout(1)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _leftovers(processes: list[psutil.Process], ports: list[int], timeout: float):
    """(processes still alive, ports still held), polled until both are empty or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in processes if _alive(p)]
        held = [port for port in ports if not _port_free(port)]
        if (not alive and not held) or time.monotonic() > deadline:
            return alive, held
        time.sleep(0.1)


def _listening_ports(processes: list[psutil.Process]) -> dict[int, str]:
    """{port: address} of every TCP socket the processes listen on."""
    pids = {p.pid for p in processes}
    return {
        c.laddr.port: c.laddr.ip
        for c in psutil.net_connections(kind="inet")
        if c.pid in pids and c.status == psutil.CONN_LISTEN
    }


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)  # gRPC: ::ffff:127.0.0.1
    return (mapped or address).is_loopback


def _kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:  # the test failed: do not leave them behind
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSEGV])
def test_nothing_outlives_a_killed_serve(models, tmp_path, signum):
    with serve_stack(models, tmp_path) as server:
        descendants = psutil.Process(server.proc.pid).children(recursive=True)
        names = {p.name() for p in descendants}
        assert {"nginx", "tfs-model-serve"} <= names, names
        listening = _listening_ports(descendants)
        ports = sorted(listening)
        # the front port, each model server's gRPC and REST port (the Python service listens
        # on a unix socket)
        assert server.port in ports and set(server.rest_ports) <= set(ports), listening
        # our model server binds the loopback only (nginx, here, too: --host 127.0.0.1)
        assert all(_loopback(ip) for ip in listening.values()), listening
        conf = (server.run_dir / "nginx.conf").read_text()
        temporary = {
            Path(re.search(r'if \(!-f "([^"]+)"\)', conf).group(1)).parent,  # type: ignore[union-attr]
            Path(re.search(r'server "unix:([^"]+)" ', conf).group(1)).parent,  # type: ignore[union-attr]
        }
        assert all(d.is_dir() and d.parent == Path(tempfile.gettempdir()) for d in temporary)
        server.proc.send_signal(signum)
        server.proc.wait(10)
        alive, held = _leftovers(descendants, ports, 5.0)
        try:
            assert not alive, [(p.pid, p.name()) for p in alive]
            assert not held
        finally:
            _kill_all(alive)
        deadline = time.monotonic() + 5  # the watchdog removes serve's temporary directories
        while any(d.exists() for d in temporary) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(d.exists() for d in temporary), temporary


@pytest.mark.parametrize("user_code", [False, True], ids=["fast-path", "user-code"])
def test_a_normal_start_logs_no_error(models, models_with_code, tmp_path, user_code):
    root = models_with_code if user_code else models
    with serve_stack(root, tmp_path) as server:
        ping = requests.get(f"{server.url}/ping", timeout=5)
        assert ping.status_code == 200, ping.text
        body = {"sleep": 0} if user_code else {"instances": [1.0]}
        reply = requests.post(f"{server.url}/invocations", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        text = server.log_path.read_text(errors="replace")
    errors = [line for line in text.splitlines() if ERROR_LINE.search(line)]
    assert not errors, "\n".join(errors)
    assert "ready:" in text  # the log is serve's whole log


def _slow_request(server, seconds: float, result: dict) -> threading.Thread:
    def call() -> None:
        try:
            result["reply"] = requests.post(
                f"{server.url}/invocations", json={"sleep": seconds}, timeout=120
            )
        except requests.RequestException as exc:
            result["error"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 30  # in flight once the handler says so
    while f"sleeping {seconds}s" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"sleeping {seconds}s" in server.log(), server.log()[-3000:]
    return thread


def test_sigterm_answers_the_request_in_flight(models_with_code, tmp_path):
    env = {"SAGEMAKER_GUNICORN_WORKERS": "1"}
    with serve_stack(models_with_code, tmp_path, env) as server:
        result: dict = {}
        thread = _slow_request(server, 3, result)
        server.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = server.proc.wait(SAGEMAKER_KILL_SECONDS)
        elapsed = time.monotonic() - started
        print(f"SIGTERM to exit with a 3 s request in flight: {elapsed:.1f}s")
        thread.join(10)
        assert "reply" in result, result
        assert result["reply"].status_code == 200, result["reply"].text
        assert result["reply"].json() == {"predictions": [3.5]}
        assert code == 0, server.log()[-3000:]
        assert elapsed < SHUTDOWN_BUDGET_SECONDS


def test_sigterm_ends_serve_within_the_budget_whatever_a_handler_does(models_with_code, tmp_path):
    # the handler sleeps past SageMaker's SIGKILL: serve must not wait for it
    env = {"SAGEMAKER_GUNICORN_WORKERS": "1"}
    with serve_stack(models_with_code, tmp_path, env) as server:
        descendants = psutil.Process(server.proc.pid).children(recursive=True)
        result: dict = {}
        thread = _slow_request(server, 2 * SAGEMAKER_KILL_SECONDS, result)
        server.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            code = server.proc.wait(SAGEMAKER_KILL_SECONDS)
        except Exception:
            pytest.fail(f"serve still running {SAGEMAKER_KILL_SECONDS}s after SIGTERM")
        elapsed = time.monotonic() - started
        print(f"SIGTERM to exit with a handler sleeping past SIGKILL: {elapsed:.1f}s")
        thread.join(10)
        assert code == 0, server.log()[-3000:]
        assert elapsed < SAGEMAKER_KILL_SECONDS, elapsed
        assert "error" in result or result["reply"].status_code >= 500, result
        # not silently: the log says a request was cut off
        assert "1 request(s) still in progress after the" in server.log(), server.log()[-3000:]
        alive, _ = _leftovers(descendants, [], 5.0)
        try:
            assert not alive, [(p.pid, p.name()) for p in alive]
        finally:
            _kill_all(alive)


def test_a_killed_nginx_master_takes_its_workers_along(models, tmp_path):
    # left behind, its workers would share the front port (reuseport) with the new nginx and
    # answer /ping from the old config
    with serve_stack(models, tmp_path) as server:
        (master,) = [p for p in psutil.Process(server.proc.pid).children() if p.name() == "nginx"]
        workers = master.children()
        assert workers
        master.kill()
        alive, _ = _leftovers(workers, [], 5.0)
        try:
            assert not alive, [(p.pid, p.name()) for p in alive]
        finally:
            _kill_all(alive)
        assert server.wait_healthy(60), server.log()[-3000:]
        statuses = [requests.get(f"{server.url}/ping", timeout=5).status_code for _ in range(20)]
        assert statuses == [200] * 20


PASS_THROUGH = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, "application/json"
"""


def _handler_processes(marker: str) -> list[psutil.Process]:
    """Handler processes (environments/host.py) whose command line names `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if "environments.host" in command and marker in command:
            found.append(process)
    return found


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
@pytest.mark.parametrize("multi_model", [False, True], ids=["single-model", "multi-model"])
def test_no_handler_process_outlives_a_killed_serve(tmp_path, multi_model, signum):
    """Handler processes of their own (a code/lib module the service uses): serve's, and on a
    multi-model endpoint those a load started, which are no children of serve's; neither
    they nor the service's private folder (its socket, the ready file) are left behind,
    whether serve is killed or stops."""
    import example_models as em

    root = tmp_path / "models"
    model = root / "m" if multi_model else root
    em.half_plus_three_tf1(model / "half_plus_three", versions=(1,))
    (model / "code" / "lib").mkdir(parents=True)
    (model / "code" / "inference.py").write_text(PASS_THROUGH)
    (model / "code" / "lib" / "crc32c.py").write_text("VALUE = 1\n")
    env = {"SAGEMAKER_MULTI_MODEL": "true"} if multi_model else {}
    (tmp_path / "run").mkdir()
    with serve_stack(root, tmp_path / "run", env) as server:
        if multi_model:
            reply = requests.post(
                f"{server.url}/models", json={"model_name": "m", "url": str(model)}, timeout=120
            )
            assert reply.status_code == 200, reply.text
        handlers = _handler_processes(str(model / "code"))
        assert len(handlers) >= 2, handlers  # the pool's master and its worker(s)
        folders = {Path(p.cmdline()[p.cmdline().index("--dir") + 1]) for p in handlers}
        conf = (server.run_dir / "nginx.conf").read_text()
        folders.add(Path(re.search(r'server "unix:([^"]+)" ', conf).group(1)).parent)  # type: ignore[union-attr]
        assert all(folder.is_dir() for folder in folders)
        server.proc.send_signal(signum)
        server.proc.wait(SAGEMAKER_KILL_SECONDS)
        alive, _ = _leftovers(handlers, [], 10.0)
        try:
            assert not alive, [(p.pid, p.cmdline()[:6]) for p in alive]
        finally:
            _kill_all(alive)
        deadline = time.monotonic() + 5
        while any(f.exists() for f in folders) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(f.exists() for f in folders), folders


# ----- what user code and pip leave running: stopped with what started them ---------------------

# starts a child that leaves its process group and session (as a daemon would) and answers its pid
DETACHING = """
import json
import subprocess


def input_handler(data, context):
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    return json.dumps({"instances": [float(child.pid)]})
"""


def _detached_child(server, path: str) -> psutil.Process:
    """Invoke `path`: its handler starts a detached `sleep 600`, whose pid comes back (the
    model is half_plus_three: 0.5 * pid + 3)."""
    reply = requests.post(f"{server.url}{path}", data="{}", timeout=60)
    assert reply.status_code == 200, reply.text
    pid = round((reply.json()["predictions"][0] - 3.0) * 2)
    child = psutil.Process(pid)
    assert child.cmdline() == ["sleep", "600"] and child.pid != child.ppid()
    return child


def _gone(process: psutil.Process, timeout: float) -> bool:
    alive, _ = _leftovers([process], [], timeout)
    _kill_all(alive)
    return not alive


def _detaching_models(root: Path) -> dict[str, Path]:
    """Two multi-model models whose handler detaches a child: `own` in handler processes of
    its own (code/lib), `shared` in the service's workers."""
    import example_models as em

    models = {}
    for name, lib in (("own", True), ("shared", False)):
        model = root / name
        em.half_plus_three_tf1(model / "half_plus_three", versions=(1,))
        (model / "code").mkdir()
        (model / "code" / "inference.py").write_text(DETACHING)
        if lib:
            (model / "code" / "lib").mkdir()
            (model / "code" / "lib" / "crc32c.py").write_text("VALUE = 1\n")
        models[name] = model
    return models


def _load(server, name: str, url: Path) -> None:
    reply = requests.post(
        f"{server.url}/models", json={"model_name": name, "url": str(url)}, timeout=120
    )
    assert reply.status_code == 200, reply.text


def test_what_a_handler_detaches_ends_at_unload_and_at_serves_stop(tmp_path):
    models = _detaching_models(tmp_path / "models")
    (tmp_path / "run").mkdir()
    with serve_stack(tmp_path / "models", tmp_path / "run", {"SAGEMAKER_MULTI_MODEL": "true"}) as s:
        for name, url in models.items():
            _load(s, name, url)
        own = _detached_child(s, "/models/own/invoke")
        shared = _detached_child(s, "/models/shared/invoke")
        assert requests.delete(f"{s.url}/models/own", timeout=60).status_code == 200
        assert _gone(own, 10.0), "a child of the unloaded model's handler outlived the unload"
        _load(s, "own", models["own"])
        again = _detached_child(s, "/models/own/invoke")
        assert shared.is_running() and again.is_running()
        assert s.stop() == 0
    assert _gone(shared, 5.0) and _gone(again, 5.0), "a handler's child outlived serve's stop"


def _silent_index() -> tuple[socket.socket, str]:
    """A package index that takes connections and never answers (a pip that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}/simple"


def test_nothing_of_user_code_or_pip_outlives_a_killed_serve(tmp_path):
    """kill -9 of serve while a load's pip hangs and a handler's detached child runs: the
    watchdog kills both (they left every process group serve knows)."""
    models = _detaching_models(tmp_path / "models")
    hanging = models["own"].parent / "hanging"
    shutil.copytree(models["own"], hanging)
    listener, index = _silent_index()
    (hanging / "code" / "lib").rename(hanging / "code" / "lib-unused")
    (hanging / "code" / "requirements.txt").write_text(f"--index-url {index}\nsomething==1.0\n")
    (tmp_path / "run").mkdir()
    env = {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "300"}
    with listener, serve_stack(tmp_path / "models", tmp_path / "run", env) as server:
        _load(server, "shared", models["shared"])
        child = _detached_child(server, "/models/shared/invoke")
        loading = threading.Thread(target=_load_quietly, args=(server, hanging), daemon=True)
        loading.start()
        deadline = time.monotonic() + 60
        pips: list[psutil.Process] = []
        while not pips and time.monotonic() < deadline:
            pips = [p for p in psutil.process_iter(["cmdline"]) if _is_pip_install(p)]
            time.sleep(0.1)
        assert pips, "pip did not start"
        time.sleep(1.5)  # the watchdog notes what runs under serve every 0.5 s
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        for process in [child, *pips]:
            assert _gone(process, 10.0), f"{process.pid} outlived a killed serve"


def _load_quietly(server, url: Path) -> None:
    with contextlib.suppress(requests.RequestException):
        requests.post(
            f"{server.url}/models", json={"model_name": "hanging", "url": str(url)}, timeout=120
        )


def _is_pip_install(process: psutil.Process) -> bool:
    cmdline = " ".join(process.info["cmdline"] or [])
    return " pip " in f" {cmdline} " and "install" in cmdline
