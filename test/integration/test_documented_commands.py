"""Every command of the documentation is run, as written, and shows what the documentation says.

The commands come from the Markdown files (test/support/doc_commands.py: README.md and the
MkDocs pages under docs/). The block commands of each section run in order in a fresh
copy of the repository's top (its files linked, `run/` its own; the example model built once
and copied), each in bash from that top, as a reader pastes them: `make serve` and the other
servers in the background until they answer (and stopped with Ctrl-C's SIGINT when the section
ends or the next one starts), a `console` block's commands compared with the output it shows.
The getting-started page is one sequence, top to bottom in one copy, as a new user follows it
(what one section leaves, the next one meets). No sequence may leave a file git would list as
untracked in the repository's top (what they write goes under the ignored `run/`).
The only change to a command is the port: 8080 (and 8081, the getting-started page's other
port), 8500 and 8501 become free ones (the environment's SAGEMAKER_BIND_TO_PORT for `serve`), so
that tests never take a fixed port.

What is not run here is in one of the tables below, with where it runs or why it cannot:
RUN_BY_CI (.ci/run runs it, and this checks that it does), RUN_ELSEWHERE (a test that runs it,
checked to name it), NOT_RUN (needs an AWS account, a built image, or minutes of load), and
NAMES (a command's name in the prose, not a command line). A command in none of them is run by
the section it is in, so a new command in the documentation is run as soon as it is written.
Every command of the getting-started page is run here, or by CI (`make install`, `make test`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from conftest import REPO
from doc_commands import DocCommand, documented_blocks, documented_commands, output_matches
from process_utils import free_port_range

# linked into every sandbox: what the documented commands read (run/ is the sandbox's own)
LINKED = ("Makefile", "setup.py", "pyproject.toml", ".venv", "container", "nginx", "test",
          "scripts", "examples", "docker", "README.md", "docs", "mkdocs.yml")  # fmt: skip
GETTING_STARTED = "docs/getting-started.md"
COMMAND_TIMEOUT = 300.0
SERVER_START_TIMEOUT = 300.0  # `make serve` builds the example model first when it has to
SERVER_STOP_TIMEOUT = 40.0

RUN_BY_CI = {
    "make install": "make install",
    "make lint": "make lint",
    "make test": "make test",
    "make unit": "make test",  # make test runs test/unit and test/integration
    "make integration": "make test",
    "make image": "make image",
    "make image-test": "make image-test",
    "make engine-stop": "make engine-stop",
}
RUN_ELSEWHERE = {
    ".venv/bin/python examples/jpeg_images/run.py": "test/integration/test_examples_direct.py",
    ".venv/bin/python examples/tfrecord_examples/run.py":
        "test/integration/test_examples_direct.py",
    ".venv/bin/python scripts/classic_image_jobs.py --n 2000 [--model digits|resnet50] "
    "[--kill-and-resume]": "test/integration/test_classic_image_jobs.py",
    ".venv/bin/python scripts/mme_churn_soak.py [--models 2000] [--warmup 100]":
        "test/integration/test_multi_model_churn.py",
    "REGISTRY=localhost:5000 REGISTRY_TLS_VERIFY=false scripts/publish.sh cpu":
        "test/image/test_publish.py",
    ".venv/bin/python scripts/settings_table.py":
        "test/unit/sagemaker_serving/config/test_settings_docs.py",
}  # fmt: skip
_AWS = "needs an AWS account (no AWS API is reachable from the tests)"
_IMAGE = "needs the image built and a container engine: make image-test (CI) runs the image"
_BENCH = "a benchmark: minutes of load on every core (the guide keeps them out of make test)"
NOT_RUN = {
    "IMAGE=$(AWS_REGION=eu-west-1 scripts/publish.sh cpu | tail -n 1)": _AWS,
    "AWS_REGION=eu-west-1 scripts/publish.sh cpu": _AWS,
    "tar -C run/models -czf run/model.tar.gz . && aws s3 cp run/model.tar.gz "
    "s3://my-bucket/tfs/model.tar.gz": _AWS,
    "scripts/start.sh run/models cpu": _IMAGE,
    "scripts/curl.sh": _IMAGE,
    "scripts/stop.sh": _IMAGE,
    "make perf": _BENCH,
    "make perf-container": _BENCH,
    "make fuzz": "10,000 hostile requests (minutes); make test runs 600 of them (test_fuzz.py)",
    "make soak": _BENCH,
    "make mme-churn": _BENCH + "; test_multi_model_churn.py runs a short churn",
    "make image-facts": "a measurement of the built image (minutes), not a test",
    "make images": "the GPU and arm64 images need base images no registry here can give; "
    "make image (CI) builds the CPU one",
    "REGISTRY=registry.example.com/ml scripts/publish.sh cpu": "registry.example.com stands for "
    "your registry; test/image/test_publish.py pushes to a local one",
    "make format": "rewrites the sources; make lint (CI) checks that they are formatted",
    "make clean": "deletes .venv",
    "IMAGE=ref make image-test": "`ref` stands for another image's reference; make image-test "
    "(CI) tests the image make image built",
    ".venv/bin/mkdocs serve": "serves the documentation on a fixed port until stopped; make lint "
    "(CI) builds the same site with --strict",
}  # fmt: skip
NOT_RUN_PREFIXES = {
    "aws ": _AWS,
    "docker run ": _IMAGE + " (test/image/test_serverless.py runs the serverless profile)",
    ".venv/bin/python test/perf/": _BENCH,
    ".venv/bin/tfs-model-server --model_name=m --model_base_path=/models/m": "/models/m stands "
    "for a model of yours with model.tflite; test/integration/test_model_server_tflite.py serves "
    "one so",
}
NAMES = {".venv/bin/serve", ".venv/bin/tfs-model-server", ".venv/bin/tfs-batch-transform"}


@dataclass(frozen=True)
class Server:
    """A documented command that serves until stopped: ready once `path` answers 200 on the
    port named `port` (front, rest)."""

    path: str
    port: str = "front"


SERVERS = {
    "make serve": Server("/ping"),
    "SAGEMAKER_BIND_TO_PORT=8081 make serve": Server("/ping"),
    ".venv/bin/serve --model-dir run/models --host 127.0.0.1": Server("/ping"),
    "SAGEMAKER_MULTI_MODEL=true .venv/bin/serve --model-dir run/models --host 127.0.0.1": Server(
        "/ping"
    ),
    ".venv/bin/tfs-model-server --model_name=half_plus_three": Server(
        "/v1/models/half_plus_three", "rest"
    ),
    ".venv/bin/tfs-model-server --model_config_file=run/models.config": Server(
        "/v1/models/half_plus_three", "rest"
    ),
}
# a command that needs a server its section starts only in the prose ("a running container")
NEEDS_SERVER = {
    ".venv/bin/tfs-batch-transform --endpoint http://localhost:8080 --input run/rows.csv "
    "--output run/out/": "make serve",
}  # fmt: skip
# what a command's run must show besides its exit code (the documented JSON it writes)
JOB_JSON = "run/job.json"


def not_run_reason(key: str) -> str | None:
    if key in NOT_RUN:
        return NOT_RUN[key]
    return next((why for prefix, why in NOT_RUN_PREFIXES.items() if key.startswith(prefix)), None)


COMMANDS = documented_commands(REPO)
BLOCK_KEYS = {c.key for c in COMMANDS if not c.inline}


def runs_here(command: DocCommand) -> bool:
    key = command.key
    return not (
        command.inline
        or key in RUN_BY_CI
        or key in RUN_ELSEWHERE
        or not_run_reason(key) is not None
    )


def sequence_of(command: DocCommand) -> str:
    """The sequence a command runs in: the getting-started page is one, from top to bottom;
    every other page's sections are one each."""
    return GETTING_STARTED if command.source.startswith(f"{GETTING_STARTED}:") else command.section


SECTIONS: dict[str, list[DocCommand]] = {}
for _command in COMMANDS:
    if runs_here(_command):
        SECTIONS.setdefault(sequence_of(_command), []).append(_command)


# ----- every command is accounted for ------------------------------------------------------


def test_every_documented_command_is_run_or_says_why_not():
    unaccounted = []
    for command in COMMANDS:
        key = command.key
        if command.inline and not (
            key in BLOCK_KEYS or key in NAMES or key in RUN_BY_CI or key in RUN_ELSEWHERE
            or not_run_reason(key)
        ):  # fmt: skip
            unaccounted.append(f"{command.source}: {key}")
    assert not unaccounted, "inline commands no test runs:\n" + "\n".join(unaccounted)
    keys = {c.key for c in COMMANDS}
    tables = [*RUN_BY_CI, *RUN_ELSEWHERE, *NOT_RUN, *SERVERS, *NEEDS_SERVER, *NAMES]
    stale = [key for key in tables if key not in keys]
    assert not stale, f"table entries the documentation no longer has: {stale}"
    assert SECTIONS, "no documented command runs here"


def test_every_command_of_the_getting_started_page_is_run():
    """Its block commands in a sandbox here (or by CI); its inline ones are block commands of
    the page, or run by CI, or a program's name."""
    page = [c for c in COMMANDS if c.source.startswith(f"{GETTING_STARTED}:")]
    assert page, f"{GETTING_STARTED} shows no command"
    run_here = {c.key for c in page if runs_here(c)}
    not_run = [
        f"{c.source}: {c.key}"
        for c in page
        if not (c.key in run_here or c.key in RUN_BY_CI or (c.inline and c.key in NAMES))
    ]
    assert not not_run, "getting-started commands no test runs:\n" + "\n".join(not_run)


def test_what_ci_runs_is_in_its_script():
    script = (REPO / ".ci" / "run").read_text().splitlines()
    for key, runs in RUN_BY_CI.items():
        ran = [line for line in script if re.search(rf"(^|\s){re.escape(runs)}(\s|$)", line)]
        assert ran, f"{key}: .ci/run does not run `{runs}`"


def test_what_other_tests_run_is_named_there():
    for key, where in RUN_ELSEWHERE.items():
        named = next(word for word in key.split() if word.endswith((".py", ".sh")))
        assert Path(named).name in (REPO / where).read_text(), f"{where} does not run {key}"


# ----- running them ----------------------------------------------------------------------------


@dataclass
class Sandbox:
    """A copy of the repository's top: its files linked, run/ its own, free ports."""

    root: Path
    ports: dict[str, int]
    env: dict[str, str] = field(default_factory=dict)
    servers: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def command(self, text: str) -> str:
        """The command as written, on this sandbox's ports."""
        front, grpc, rest = self.ports["front"], self.ports["grpc"], self.ports["rest"]
        text = text.replace("localhost:8080", f"localhost:{front}")
        text = text.replace("localhost:8081", f"localhost:{front}")
        text = text.replace("SAGEMAKER_BIND_TO_PORT=8081", f"SAGEMAKER_BIND_TO_PORT={front}")
        text = text.replace("--port=8500", f"--port={grpc}")
        text = text.replace("--rest_api_port=8501", f"--rest_api_port={rest}")
        return text.replace("localhost:8501", f"localhost:{rest}")

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user
        low = self.ports["front"] + 1
        return {
            **env,
            "SAGEMAKER_BIND_TO_PORT": str(self.ports["front"]),
            "SAGEMAKER_SAFE_PORT_RANGE": f"{low + 2}-{low + 9}",
            **self.env,
        }

    def run(self, text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", self.command(text)],
            cwd=self.root,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )

    def start(self, text: str, server: Server) -> None:
        """The server in the background (its own process group, as a terminal's job), until
        `server.path` answers 200; the running one before it is stopped first."""
        self.stop()
        log = self.root / f"server-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", self.command(text)],
                cwd=self.root, env=self.environment(), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.servers.append(proc)
        url = f"http://127.0.0.1:{self.ports[server.port]}{server.path}"
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(requests.RequestException):
                if requests.get(url, timeout=2).status_code == 200:
                    return
            time.sleep(0.3)
        raise AssertionError(f"{text} did not answer {url}:\n{log.read_text()[-4000:]}")

    def stop(self) -> None:
        """Ctrl-C to the running server's process group; SIGKILL past the deadline."""
        while self.servers:
            proc = self.servers.pop()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                code = proc.wait(SERVER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                raise AssertionError(f"{proc.args} did not stop on SIGINT") from None
            assert code in (0, 2, -signal.SIGINT, 130), f"{proc.args} ended with {code}"


@pytest.fixture(scope="module")
def example_run_dir(tmp_path_factory) -> Path:
    """run/ after `make example-model` (the documented command), shared by the sections."""
    with sandbox(tmp_path_factory.mktemp("example_model")) as box:
        done = box.run("make example-model")
        shown = done.stdout + done.stderr
        assert done.returncode == 0, shown
        assert not [marker for marker in NOISE if marker in shown], shown  # TF's: in a log
        return box.root / "run"


@contextlib.contextmanager
def sandbox(root: Path, run_dir: Path | None = None) -> Iterator[Sandbox]:
    for name in LINKED:
        (root / name).symlink_to(REPO / name)
    if run_dir is not None:
        shutil.copytree(run_dir, root / "run", symlinks=True)
    front, high = free_port_range(14)
    box = Sandbox(root, {"front": front, "grpc": high - 1, "rest": high})
    try:
        yield box
    finally:
        box.stop()


NOISE = ("absl::InitializeLog", "cuda drivers", "cuInit", "oneDNN custom operations",
         "cpu_feature_guard", "Traceback")  # fmt: skip


def untracked(root: Path) -> list[str]:
    """What the commands left in the sandbox's top that git would list as untracked in the
    repository: every entry the sandbox did not start with that .gitignore does not cover."""
    made = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir())
    made = [name for name in made if name.rstrip("/") not in LINKED]
    if not made:
        return []
    ignored = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(made), capture_output=True, text=True, timeout=30, check=False,
    ).stdout.splitlines()  # fmt: skip
    return [name for name in made if name not in ignored]


def assign(box: Sandbox, key: str) -> bool:
    """`NAME=value` alone: kept for the section's later commands, as the shell would."""
    match = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(?:[^\s$]|\$\([^)]*\)|\$)*", key)
    if not match:
        return False
    done = box.run(f'{key}; printf %s "${match.group(1)}"')
    assert done.returncode == 0, done.stderr
    box.env[match.group(1)] = done.stdout
    return True


def check_job_json(box: Sandbox, command: DocCommand) -> None:
    """The CreateTransformJob request written is the JSON the documentation shows."""
    page = command.source.rsplit(":", 1)[0]
    shown = next(b for b in documented_blocks(REPO) if b.language == "json"
                 and b.source.startswith(f"{page}:")
                 and _line(b.source) > _line(command.source))  # fmt: skip
    expected = json.loads(shown.text)
    written = json.loads((box.root / JOB_JSON).read_text())
    assert written["TransformJobName"].startswith("tfs-rows-")
    expected["TransformJobName"] = written["TransformJobName"]  # the date of the run
    assert written == expected


def _line(source: str) -> int:
    return int(source.rsplit(":", 1)[1])


@pytest.mark.parametrize("section", list(SECTIONS))
def test_the_commands_of_a_section_run_as_documented(section, example_run_dir, tmp_path):
    with sandbox(tmp_path, example_run_dir) as box:
        for command in SECTIONS[section]:
            key = command.key
            where = f"{command.source}: {key}"
            if key in SERVERS:
                box.start(command.text, SERVERS[key])
                continue
            if key in NEEDS_SERVER and not box.servers:
                needed = NEEDS_SERVER[key]
                box.start(needed, SERVERS[needed])
            if assign(box, key):
                continue
            done = box.run(command.text)
            assert done.returncode == 0, f"{where}\n{done.stdout}\n{done.stderr}"[-4000:]
            if command.output is not None:
                assert output_matches(command.output, done.stdout), (
                    f"{where} printed\n{done.stdout}\nnot what the documentation shows:\n"
                    + "\n".join(command.output)
                )
            if f"> {JOB_JSON}" in command.text:
                check_job_json(box, command)
        box.stop()
        for log in box.logs:  # what the servers wrote: no TensorFlow start-up noise, no trace
            text = log.read_text(errors="replace")
            found = [marker for marker in NOISE if marker in text]
            assert not found, f"{log.name}: {found}\n{text[-3000:]}"
        assert not untracked(box.root), f"{section} left untracked files: {untracked(box.root)}"
