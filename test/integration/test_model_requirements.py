"""A model's code/requirements.txt through the whole native stack: only requirement lines and
a short list of options, files and paths inside the model's code/ only, with a wheelhouse no
index and no other link, pip's memory and an environment's size bounded, no file's content in
an answer; on a multi-model endpoint, environments counted against
SAGEMAKER_MME_MAX_ENVIRONMENTS before anything is installed, one load of a name at a time, a
failed load leaving no environment, and loads that hang holding up no other request."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from conftest import make_wheel, run_serve, serve_stack, tiny_wheel

WAIT_SECONDS = 12  # SAGEMAKER_TFS_WAIT_TIME_SECONDS: a load's deadline
SECRET = "secret-4c1f9e-never-in-an-answer"  # in serve's environment
MEMORY_MB = 256  # SAGEMAKER_PIP_MAX_MEMORY_MB: pip needs about 128 MiB for numpy
DISK_MB = 32  # SAGEMAKER_ENVIRONMENT_MAX_DISK_MB


class Listener:
    """A loopback TCP server counting connections: `answer` gives each an empty HTML page (an
    index or find-links page with nothing), else it holds them open and never answers."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.count = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            if not self.answer:
                self.held.append(conn)
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n"
                    b"<html></html>"
                )

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def links() -> Iterator[Listener]:
    """PIP_FIND_LINKS in serve's environment: pip without a wheelhouse reads it."""
    listener = Listener(answer=True)
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def tarpit() -> Iterator[Listener]:
    """An index that takes connections and never answers: a pip that hangs."""
    listener = Listener(answer=False)
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    import example_models as em

    directory = tmp_path_factory.mktemp("template")
    em.half_plus_three_tf1(directory / "half_plus_three", versions=(1,))
    return directory


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A folder beside the model directory: a project whose build backend leaves a mark when
    it runs, and a file of requirements."""
    directory = tmp_path_factory.mktemp("outside")
    backend_project(directory / "project", "outside-pkg", marker=directory / "ran")
    (directory / "more.txt").write_text("tinypkg==1.0\n")
    return directory


@pytest.fixture(scope="module")
def mme(root, links, tmp_path_factory) -> Iterator:
    env = {
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_GUNICORN_WORKERS": "2",
        "SAGEMAKER_MME_MAX_ENVIRONMENTS": "2",
        "SAGEMAKER_TFS_WAIT_TIME_SECONDS": str(WAIT_SECONDS),
        "SAGEMAKER_PIP_MAX_MEMORY_MB": str(MEMORY_MB),
        "SAGEMAKER_ENVIRONMENT_MAX_DISK_MB": str(DISK_MB),
        "PIP_FIND_LINKS": links.url,
        "TEST_SECRET": SECRET,
    }
    with serve_stack(root, tmp_path_factory.mktemp("stack"), env) as server:
        yield server


@pytest.fixture(autouse=True)
def nothing_left_loaded(request) -> Iterator[None]:
    """Each test starts with no model loaded, whatever the one before it left."""
    yield
    if "mme" in request.fixturenames:
        server = request.getfixturevalue("mme")
        for model in requests.get(f"{server.url}/models", timeout=30).json()["models"]:
            unload(server, model["modelName"])


# ----- helpers ---------------------------------------------------------------------------------


def backend_project(directory: Path, name: str, marker: Path, body: str = "") -> Path:
    """A project with a build backend of its own (no download needed to build it): it writes
    `marker` when pip runs it, then `body`, then builds an empty wheel."""
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        "[build-system]\nrequires = []\nbuild-backend = 'backend'\nbackend-path = ['.']\n\n"
        f"[project]\nname = '{name}'\nversion = '1.0'\n"
    )
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    (directory / "backend.py").write_text(
        f"""
import pathlib, zipfile
pathlib.Path({str(marker)!r}).write_text("ran")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    {body or "pass"}
    info = "{name.replace("-", "_")}-1.0.dist-info"
    path = pathlib.Path(wheel_directory) / "{name.replace("-", "_")}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(info + "/METADATA", {metadata!r})
        wheel.writestr(info + "/WHEEL", {wheel!r})
        wheel.writestr(info + "/RECORD", "")
    return path.name


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError
"""
    )
    return directory


def new_model(root: Path, template: Path, name: str, files: dict[str, str]) -> Path:
    """root/name: half_plus_three and code/ with `files` (path -> text)."""
    url = root / name
    shutil.copytree(template, url)
    for file, text in files.items():
        (url / "code" / file).parent.mkdir(parents=True, exist_ok=True)
        (url / "code" / file).write_text(text)
    return url


HANDLER = "def handler(data, context):\n    return data.read()\n"
TINYPKG_HANDLER = (
    "import tinypkg\n\n\ndef handler(data, context):\n"
    "    return '{\"tinypkg\": %d}' % tinypkg.VALUE, 'application/json'\n"
)


def load(server, name: str, url: Path | str, timeout: float = 120) -> requests.Response:
    body = {"model_name": name, "url": str(url)}
    return requests.post(f"{server.url}/models", json=body, timeout=timeout)


def unload(server, name: str) -> requests.Response:
    return requests.delete(f"{server.url}/models/{name}", timeout=60)


def environments(server) -> list[str]:
    """The environments the multi-model endpoint keeps (folders; not their lock files)."""
    directory = server.run_dir / "multi-model" / "environments"
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.is_dir())


def refused(reply: requests.Response, *fragments: str) -> str:
    """The 400's error text, checked to hold `fragments`."""
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    for fragment in fragments:
        assert fragment in error, error
    return error


# ----- section 4: what requirements.txt may name ------------------------------------------------

SECRET_FILES = {
    "-r /etc/passwd": "root:",
    "-c /etc/passwd": "root:",
    "--requirement=/etc/shadow": "root:",
    "-r /proc/self/environ": SECRET,
    "-r/proc/self/environ": SECRET,
}


@pytest.mark.parametrize("line", list(SECRET_FILES))
def test_a_file_outside_code_is_refused_and_its_content_never_answered(mme, root, template, line):
    kept = environments(mme)  # kept from earlier loads
    name = f"secret{list(SECRET_FILES).index(line)}"
    url = new_model(
        root, template, name, {"inference.py": HANDLER, "requirements.txt": f"# mine\n{line}\n"}
    )
    error = refused(load(mme, name, url), "code/requirements.txt line 2", "outside code/")
    assert SECRET_FILES[line] not in error and SECRET not in error
    assert set(environments(mme)) <= set(kept)  # none new


OUTSIDE_PATHS = [
    "-e {project}",
    "--editable={project}",
    "outside-pkg @ file://{project}",
    "{project}",
    "{relative}",
    "-r {outside}/more.txt",
]


@pytest.mark.parametrize("line", OUTSIDE_PATHS)
def test_a_path_outside_code_is_refused_and_nothing_of_it_runs(mme, root, template, outside, line):
    kept = environments(mme)  # kept from earlier loads
    name = f"path{OUTSIDE_PATHS.index(line)}"
    url = root / name
    relative = os.path.relpath(outside / "project", url / "code")
    text = line.format(project=outside / "project", outside=outside, relative=relative)
    new_model(root, template, name, {"inference.py": HANDLER, "requirements.txt": text + "\n"})
    refused(load(mme, name, url), "code/requirements.txt line 1")
    assert not (outside / "ran").exists(), "the outside project's build backend ran"
    assert set(environments(mme)) <= set(kept)  # none new


def test_find_links_to_another_models_wheelhouse_is_refused(mme, root, template):
    kept = environments(mme)  # kept from earlier loads
    private = new_model(root, template, "private", {"inference.py": HANDLER})
    make_wheel(private / "code" / "wheelhouse", "privpkg", "1.0", {"privpkg.py": "X = 1\n"})
    thief = new_model(
        root,
        template,
        "thief",
        {
            "inference.py": HANDLER,
            "requirements.txt": f"--find-links {private}/code/wheelhouse\nprivpkg==1.0\n",
        },
    )
    refused(load(mme, "thief", thief), "code/requirements.txt line 1", "outside code/")
    assert set(environments(mme)) <= set(kept)  # none new


def test_with_a_wheelhouse_pip_reaches_no_index_and_no_other_link(mme, root, template, links):
    before = links.count
    files = {"inference.py": TINYPKG_HANDLER, "requirements.txt": "tinypkg==1.0\n"}
    offline = new_model(root, template, "offline", files)
    tiny_wheel(offline / "code" / "wheelhouse")
    reply = load(mme, "offline", offline)  # PIP_FIND_LINKS in serve's environment: not read
    assert reply.status_code == 200, reply.text
    assert unload(mme, "offline").status_code == 200
    for number, line in enumerate(
        [f"--find-links {links.url}/", f"-i {links.url}/simple", f"--extra-index-url {links.url}/"]
    ):
        text = f"{line}\ntinypkg==1.0\n"
        url = new_model(
            root, template, f"linked{number}", {"inference.py": HANDLER, "requirements.txt": text}
        )
        tiny_wheel(url / "code" / "wheelhouse")
        refused(load(mme, f"linked{number}", url), "code/requirements.txt line 1", "wheelhouse")
    assert links.count == before, "pip reached a link beside the wheelhouse"


def test_dev_zero_a_huge_file_and_a_fifo_are_refused_at_once(mme, root, template):
    kept = environments(mme)  # kept from earlier loads
    cases = {
        "zero": ("-r /dev/zero\n", {}, "outside code/"),
        "huge": ("-r huge.txt\n", {"huge.txt": "# padding\n" * 200_000}, "larger than"),
        "fifo": ("-c pipe\n", {}, "not a regular file"),
    }
    for name, (text, extra, why) in cases.items():
        url = new_model(
            root, template, name, {"inference.py": HANDLER, "requirements.txt": text, **extra}
        )
        if name == "fifo":
            os.mkfifo(url / "code" / "pipe")
        started = time.monotonic()
        refused(load(mme, name, url), "line 1", why)
        assert time.monotonic() - started < 5
    assert set(environments(mme)) <= set(kept)  # none new


def deflated_wheel(directory: Path, name: str, files: dict[str, int]) -> Path:
    """A wheel of files of zeros (path -> size), compressed: small, large once unpacked."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-1.0.dist-info"
    path = directory / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file, size in files.items():
            with wheel.open(file, "w") as out:
                for _ in range(size >> 20):
                    out.write(bytes(1 << 20))
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        record = "".join(f"{f},,\n" for f in [*files, f"{info}/METADATA", f"{info}/WHEEL"])
        wheel.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


@pytest.mark.parametrize(
    "files",
    [{"bomb/big.bin": 100 << 20}, {f"spread/part{i}.bin": 8 << 20 for i in range(6)}],
    ids=["one-file", "many-files"],
)
def test_an_environment_past_its_disk_bound_is_refused_and_removed(mme, root, template, files):
    kept = environments(mme)  # kept from earlier loads
    name = "bomb" if len(files) == 1 else "spread"
    url = new_model(
        root, template, name, {"inference.py": HANDLER, "requirements.txt": f"{name}\n"}
    )
    wheel = deflated_wheel(url / "code" / "wheelhouse", name, files)
    assert wheel.stat().st_size < 1 << 20
    refused(load(mme, name, url), f"SAGEMAKER_ENVIRONMENT_MAX_DISK_MB={DISK_MB}")
    assert set(environments(mme)) <= set(kept)  # none new


def test_pips_memory_is_bounded(mme, root, template, tmp_path):
    kept = environments(mme)  # kept from earlier loads
    url = new_model(root, template, "hog", {"inference.py": HANDLER, "requirements.txt": "./hog\n"})
    backend_project(url / "code" / "hog", "hog", tmp_path / "ran", "hog = bytearray(512 << 20)")
    refused(load(mme, "hog", url), f"SAGEMAKER_PIP_MAX_MEMORY_MB={MEMORY_MB}")
    assert (tmp_path / "ran").exists()  # a project inside code/ is built (its backend ran)
    assert set(environments(mme)) <= set(kept)  # none new


def test_a_single_models_refused_requirements_stop_serve_naming_the_line(template, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(template, models)
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text(HANDLER)
    (models / "code" / "requirements.txt").write_text("tinypkg==1.0\n\n-r /etc/passwd\n")
    result = run_serve(models, tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "code/requirements.txt line 3" in result.stderr and "outside code/" in result.stderr
    assert "root:" not in result.stderr


# ----- section 5: environments and loads on a multi-model endpoint ------------------------------


def test_concurrent_loads_of_one_name_give_one_200_and_409s(mme, root, template):
    files = {"inference.py": TINYPKG_HANDLER, "requirements.txt": "tinypkg==1.0\n"}
    url = new_model(root, template, "same", files)
    tiny_wheel(url / "code" / "wheelhouse")
    barrier = threading.Barrier(3)

    def attempt(_: int) -> int:
        barrier.wait()
        return load(mme, "same", url).status_code

    with ThreadPoolExecutor(3) as pool:
        statuses = sorted(pool.map(attempt, range(3)))
    assert statuses == [200, 409, 409]
    assert requests.post(f"{mme.url}/models/same/invoke", data="{}", timeout=60).json() == {
        "tinypkg": 42
    }
    assert unload(mme, "same").status_code == 200


def test_failed_loads_leave_no_environment(mme, root, template):
    kept = environments(mme)  # kept from earlier loads
    failing = "import tinypkg\nraise RuntimeError('cannot start')\n"
    for number in range(3):
        files = {"inference.py": failing, "requirements.txt": "tinypkg==1.0\n"}
        url = new_model(root, template, f"failing{number}", files)
        tiny_wheel(url / "code" / "wheelhouse")
        refused(load(mme, f"failing{number}", url), "cannot start")
    for number in range(2):  # installed and started, then the model server cannot load it
        files = {"inference.py": TINYPKG_HANDLER, "requirements.txt": "tinypkg==1.0\n"}
        url = new_model(root, template, f"broken{number}", files)
        tiny_wheel(url / "code" / "wheelhouse")
        (url / "half_plus_three" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
        reply = load(mme, f"broken{number}", url)
        assert reply.status_code == 500, reply.text
    assert set(environments(mme)) <= set(kept)  # none new
    assert not list((mme.run_dir / "multi-model" / "pools").glob("*"))


def test_a_rebuilt_wheel_of_the_same_size_is_installed_again(mme, root, template):
    files = {"inference.py": TINYPKG_HANDLER, "requirements.txt": "tinypkg==1.0\n"}
    url = new_model(root, template, "rebuilt", files)
    wheelhouse = url / "code" / "wheelhouse"
    tiny_wheel(wheelhouse)
    invoke = f"{mme.url}/models/rebuilt/invoke"
    assert load(mme, "rebuilt", url).status_code == 200
    assert requests.post(invoke, data="{}", timeout=60).json() == {"tinypkg": 42}
    assert unload(mme, "rebuilt").status_code == 200
    (wheel,) = wheelhouse.iterdir()
    size = wheel.stat().st_size
    wheel.unlink()
    make_wheel(wheelhouse, "tinypkg", "1.0", {"tinypkg/__init__.py": "VALUE = 43\n"})
    assert wheel.stat().st_size == size  # the same name and size, another content
    assert load(mme, "rebuilt", url).status_code == 200
    assert requests.post(invoke, data="{}", timeout=60).json() == {"tinypkg": 43}
    assert unload(mme, "rebuilt").status_code == 200


def timed(call) -> tuple[requests.Response, float]:
    started = time.monotonic()
    reply = call()
    return reply, time.monotonic() - started


def test_loads_past_the_bound_are_507_before_any_install_and_hanging_loads_hold_up_nothing(
    mme, root, template, tarpit
):
    """8 loads whose pip would hang (an index that never answers) against
    SAGEMAKER_MME_MAX_ENVIRONMENTS=2, and 12 whose inference.py hangs at import: 2 pips run
    (6 loads are 507 at once), lists, gets and unloads answer meanwhile, and every hanging
    load gets the service's JSON 504 at its deadline, not nginx's."""
    kept = environments(mme)  # kept from earlier loads
    assert tarpit.count == 0
    plain = new_model(root, template, "plain", {})  # no code/: nothing to install or import
    assert load(mme, "plain", plain).status_code == 200
    hanging_pip = f"--index-url {tarpit.url}/simple\nnobody-has-this==1.0\n"
    loads = []
    for number in range(8):
        files = {"inference.py": HANDLER, "requirements.txt": hanging_pip}
        loads.append((f"pip{number}", new_model(root, template, f"pip{number}", files)))
    for number in range(12):
        files = {"inference.py": "import time\ntime.sleep(600)\n"}
        loads.append((f"import{number}", new_model(root, template, f"import{number}", files)))
    with ThreadPoolExecutor(len(loads)) as pool:
        futures = {
            name: pool.submit(timed, lambda n=name, u=url: load(mme, n, u, timeout=60))
            for name, url in loads
        }
        deadline = time.monotonic() + WAIT_SECONDS / 2
        while tarpit.count < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # every load has arrived and is waiting
        for call in (
            lambda: requests.get(f"{mme.url}/models", timeout=30),
            lambda: requests.get(f"{mme.url}/models/plain", timeout=30),
            lambda: unload(mme, "plain"),
        ):
            reply, seconds = timed(call)
            assert reply.status_code == 200 and seconds < 2.0, (reply.text, seconds)
        answers = {name: future.result() for name, future in futures.items()}
    statuses = {name: reply.status_code for name, (reply, _) in answers.items()}
    pips = [name for name in statuses if name.startswith("pip")]
    assert sorted(statuses[n] for n in pips) == [504] * 2 + [507] * 6, statuses
    installs = re.findall(r"installing \S+/pip\d/code/requirements\.txt", mme.log())
    assert len(installs) == 2 and tarpit.count >= 2  # the six refused never started pip
    for name, (reply, seconds) in answers.items():
        doc = reply.json()
        if reply.status_code == 507:
            assert "SAGEMAKER_MME_MAX_ENVIRONMENTS=2" in doc["error"] and seconds < 5, doc
            continue
        assert reply.status_code == 504, (name, reply.text)
        # the service's answer at the load's deadline (nginx's would come 10 s later)
        assert WAIT_SECONDS - 1 <= seconds < WAIT_SECONDS + 5, (name, seconds)
        assert doc["request_id"] and "Gateway Timeout" not in doc["error"], doc
        what = "pip install" if name.startswith("pip") else "inference.py"
        assert what in doc["error"], doc
    assert set(environments(mme)) <= set(kept)  # none new
    assert json.loads(requests.get(f"{mme.url}/models", timeout=10).text) == {"models": []}
