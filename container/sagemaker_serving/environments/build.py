"""A `code/` directory made ready to run: its requirements installed, and where it runs.

`requirements.txt`, checked first (`requirements.py`: what pip gets is our file of the lines
allowed), goes into a virtual environment of its own (`ENV_DIR/venv`) whose
interpreter sees the container's visible packages behind its own (`visible.link_site`, named
in a `.pth` file): pip installs only what is missing or pinned differently. A package that
user code asks for and the container has installed but hides from it (TensorFlow, pillow) is
linked in too (`ENV_DIR/linked`), so pip finds it there instead of downloading it again.
pip runs within bounds (`InstallLimits`): its memory (RLIMIT_AS), the size of any file it
writes (RLIMIT_FSIZE) and of the whole environment (measured while it runs); with
code/wheelhouse it reads no configuration that could add an index or a link.

Then the choice of process. The service's workers can run the handlers only if every module
they would import exists once: the environment must bring no copy of a module the service
shares with user code (`visible.container_names`). Otherwise, and on a multi-model endpoint
for every model that brings packages of its own (two models may pin different versions of
one), the handlers run in a pool of processes on the environment's interpreter
(`pool.py`), and the service calls them over a unix socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from process_utils.exit_reason import exit_reason
from sagemaker_serving.config.settings import (
    DEFAULT_ENVIRONMENT_MAX_DISK_MB,
    DEFAULT_PIP_MAX_MEMORY_MB,
)
from sagemaker_serving.environments import pool, visible
from sagemaker_serving.environments import requirements as checked
from sagemaker_serving.user_code.loading import INFERENCE_FILE, UserCodeError, UserCodeTimeout

log = logging.getLogger(__name__)

REQUIREMENTS_FILE = checked.REQUIREMENTS_FILE
LIB_DIR = "lib"
WHEELHOUSE_DIR = checked.WHEELHOUSE_DIR
CONTAINER_PTH = "_sagemaker_container.pth"
PIP_MESSAGE_LINES = 15
MIB = 1 << 20
VENV_SITE = f"venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
SIZE_POLL_SECONDS = 0.5  # how often a command's check runs (pip's: the environment's size)
# run a command under resource limits: RLIMIT_AS and RLIMIT_FSIZE (bytes), then the command
LIMITED = """
import os, resource, sys
for limit, value in ((resource.RLIMIT_AS, sys.argv[1]), (resource.RLIMIT_FSIZE, sys.argv[2])):
    hard = resource.getrlimit(limit)[1]
    value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
    resource.setrlimit(limit, (value, value))
os.execv(sys.argv[3], sys.argv[3:])
"""


@dataclass(frozen=True)
class InstallLimits:
    """How far pip may go: its memory (address space, per process) and the environment's size
    on disk (also the largest file it may write), in MiB: SAGEMAKER_PIP_MAX_MEMORY_MB and
    SAGEMAKER_ENVIRONMENT_MAX_DISK_MB, named in the errors."""

    memory_mb: int = DEFAULT_PIP_MAX_MEMORY_MB
    disk_mb: int = DEFAULT_ENVIRONMENT_MAX_DISK_MB


def has_user_code(code_dir: Path) -> bool:
    """The Python service runs when code/ holds any of inference.py, requirements.txt, lib/."""
    return any((code_dir / name).exists() for name in (INFERENCE_FILE, REQUIREMENTS_FILE, LIB_DIR))


def has_handlers(code_dir: Path) -> bool:
    """Whether code/ brings handlers (inference.py): one with only requirements.txt or lib/
    has none, and the universal code or the built-in formats serve its model."""
    return (code_dir / INFERENCE_FILE).is_file()


@dataclass(frozen=True)
class Environment:
    """A code directory ready to import: the directories it imports from (first wins), and
    whether its handlers need processes of their own (`python`: their interpreter)."""

    code_dir: Path
    paths: tuple[str, ...]
    python: str | None = None  # set: a handler pool on this interpreter, else in-process
    reason: str = ""


def container_site(directory: Path) -> Path:
    """The folder of links to what user code sees of the container; made again when what
    it links to changed (a run directory kept across an upgrade)."""
    marker = directory / ".fingerprint"
    wanted = visible.fingerprint()
    if not marker.exists() or marker.read_text() != wanted:
        shutil.rmtree(directory, ignore_errors=True)
        packages = visible.package_folders(visible.SERVICE_PACKAGES)
        visible.link_site(directory, visible.visible_distributions(), packages)
        marker.write_text(wanted)
    return directory


def prepare(
    code_dir: Path,
    env_dir: Path,
    site: Path,
    timeout_seconds: float,
    shared_process: bool,
    limits: InstallLimits = InstallLimits(),
) -> Environment:
    """Install code/requirements.txt (unless code/lib is there, as in the AWS container) and
    decide where the handlers run. `shared_process`: others' handlers may share the service's
    processes (multi-model), so only code that brings nothing of its own runs there.
    Raises UserCodeError (what is not allowed, pip's message, the bound pip went past) or
    UserCodeTimeout; a failed install leaves no environment."""
    code_dir = code_dir.absolute()
    lib = code_dir / LIB_DIR
    requirements = code_dir / REQUIREMENTS_FILE
    install = installs(code_dir)
    if requirements.is_file() and lib.is_dir():
        log.info(
            "%s is not installed: %s is there (its packages are used instead, as in the AWS "
            "container)",
            requirements,
            lib,
        )
    site_packages: Path | None = None
    linked: Path | None = None
    if install:
        site_packages, linked = _install(code_dir, env_dir, site, timeout_seconds, limits)
    own = _own_modules(code_dir, site_packages)
    shared = own & visible.container_names()
    reason = ""
    if shared:
        reason = "it brings its own " + ", ".join(sorted(shared))
    elif shared_process and (own or install):
        reason = "a multi-model model with packages of its own"
    paths = [p for p in (site_packages, linked, lib, code_dir) if p is not None and p.is_dir()]
    if not reason:
        return Environment(code_dir, tuple(str(p) for p in paths))
    if site_packages is None:  # no install: a venv only for its interpreter
        _create_venv(env_dir, site)
    return Environment(
        code_dir,
        tuple(str(p) for p in (lib, code_dir) if p.is_dir()),
        python=str(env_dir / "venv" / "bin" / "python"),
        reason=reason,
    )


def _own_modules(code_dir: Path, site_packages: Path | None) -> set[str]:
    """Top-level modules the user's directories provide (inference.py itself aside)."""
    beside = visible.provided_names([code_dir]) - {"inference", LIB_DIR, WHEELHOUSE_DIR}
    names = visible.provided_names([code_dir / LIB_DIR]) | beside
    if site_packages is not None:
        for dist in importlib.metadata.distributions(path=[str(site_packages)]):
            names |= visible.top_level_names(dist)
    return names


def _create_venv(env_dir: Path, site: Path) -> Path:
    """A virtual environment without pip (`env_dir/venv`) whose interpreter sees `site` behind
    its own site-packages; returns that site-packages."""
    shutil.rmtree(env_dir / "venv", ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir / "venv")
    (env_dir / VENV_SITE / CONTAINER_PTH).write_text(f"{site}\n{env_dir / 'linked'}\n")
    return env_dir / VENV_SITE


def installs(code_dir: Path) -> bool:
    """Whether code/requirements.txt is installed: it is there, and code/lib is not."""
    return (code_dir / REQUIREMENTS_FILE).is_file() and not (code_dir / LIB_DIR).is_dir()


def _install(
    code_dir: Path, env_dir: Path, site: Path, timeout_seconds: float, limits: InstallLimits
) -> tuple[Path, Path]:
    """pip install code/requirements.txt (as checked) into a new environment; (its
    site-packages, the folder of the container's hidden packages it asks for). Nothing of
    the environment is left when it fails."""
    requirements = checked.read(code_dir)
    shutil.rmtree(env_dir, ignore_errors=True)
    env_dir.mkdir(parents=True)
    try:
        site_packages = _create_venv(env_dir, site)
        linked = _link_asked_for(requirements.names, code_dir, env_dir / "linked")
        _run_pip(requirements, code_dir, env_dir, timeout_seconds, limits)
    except BaseException:
        shutil.rmtree(env_dir, ignore_errors=True)
        raise
    installed = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in importlib.metadata.distributions(path=[str(site_packages)])
    )
    log.info(
        "%s: installed %s", code_dir / REQUIREMENTS_FILE, ", ".join(installed) or "nothing new"
    )
    return site_packages, linked


def _run_pip(
    requirements: checked.Requirements,
    code_dir: Path,
    env_dir: Path,
    timeout_seconds: float,
    limits: InstallLimits,
) -> None:
    """pip install -r (our file of the checked lines), in code/, within `limits`."""
    wheelhouse = code_dir / WHEELHOUSE_DIR
    temp = env_dir / "tmp"  # pip's temporary files count against the environment's size
    temp.mkdir()
    command = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(env_dir / "venv" / "bin" / "python"),
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "-r",
        str(requirements.write(env_dir)),
    ]
    env = {**os.environ, "TMPDIR": str(temp)}
    if wheelhouse.is_dir():  # shipped wheels only: no index, no link, no pip configuration
        command += ["--no-index", "--find-links", str(wheelhouse.resolve())]
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
    disk = limits.disk_mb * MIB
    what = f"pip install -r code/{REQUIREMENTS_FILE}"
    past_disk = (
        f"{what} stopped: the environment grew past SAGEMAKER_ENVIRONMENT_MAX_DISK_MB="
        f"{limits.disk_mb} (MiB)"
    )

    def check_disk() -> None:
        if tree_size(env_dir) > disk:
            raise UserCodeError(past_disk)

    log.info("installing %s into %s", code_dir / REQUIREMENTS_FILE, env_dir / "venv")
    result = run_in_group(
        [sys.executable, "-c", LIMITED, str(limits.memory_mb * MIB), str(disk), *command],
        code_dir.resolve(),
        timeout_seconds,
        env,
        check_disk,
    )
    if result is None:
        raise UserCodeTimeout(f"{what} did not finish within {timeout_seconds:.0f}s")
    shutil.rmtree(temp, ignore_errors=True)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        log.error("%s failed:\n%s", what, output)
        if "MemoryError" in output or "Cannot allocate memory" in output:
            raise UserCodeError(
                f"{what} failed: pip ran out of memory (SAGEMAKER_PIP_MAX_MEMORY_MB="
                f"{limits.memory_mb} MiB)"
            )
        if "File too large" in output:
            raise UserCodeError(past_disk)
        raise UserCodeError(
            f"{what} failed:\n{_without_folders(pip_message(result), code_dir, env_dir)}"
        )
    check_disk()


def _without_folders(text: str, code_dir: Path, env_dir: Path) -> str:
    """pip's words without the folders it names by their absolute paths: the code's own files
    relative to the model (`code/...`), the environment's by what they are (no answer names an
    internal folder)."""
    for path, name in ((env_dir / VENV_SITE, "site-packages"), (env_dir, "environment")):
        text = text.replace(str(path), name)
    for root in {code_dir.absolute(), code_dir.resolve()}:
        text = text.replace(f"{root}/", "code/")
    return text


def tree_size(directory: Path) -> int:
    """Bytes of the files under `directory` (links not followed, nor counted)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(root, name))
                total += 0 if stat.S_ISLNK(info.st_mode) else info.st_size
    return total


def run_in_group(
    command: list[str],
    cwd: Path,
    timeout_seconds: float,
    env: Mapping[str, str] | None = None,
    check: Callable[[], None] = lambda: None,
) -> subprocess.CompletedProcess | None:
    """A command in a process group of its own (`pip --python` starts pip again under the
    environment's interpreter): the whole group is killed past the timeout or once
    `check()` (called every SIZE_POLL_SECONDS) raises (its error), or when the wait is
    interrupted (serve told to stop), so nothing it started outlives it. `env`: its
    environment (default: ours), without PYTHONPATH and PYTHONHOME."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=pool.environment(os.environ if env is None else env),
        cwd=cwd,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_seconds
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                stdout, stderr = proc.communicate(timeout=max(0.0, min(left, SIZE_POLL_SECONDS)))
                break
            except subprocess.TimeoutExpired:
                if left <= SIZE_POLL_SECONDS:
                    raise
                check()
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            return None
        raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _link_asked_for(names: tuple[str, ...], code_dir: Path, target: Path) -> Path:
    """Links to the container's hidden distributions requirements.txt names (and what they
    need), so pip finds them installed; pip still installs another version where asked."""
    asked = set(names)
    hidden = visible.closure(asked) - visible.visible_distributions()
    visible.link_site(target, hidden)
    if hidden:
        named = ", ".join(sorted(hidden & asked))
        rest = ", ".join(sorted(hidden - asked))
        log.info(
            "%s: the container's %s used as installed%s",
            code_dir / REQUIREMENTS_FILE,
            named,
            f" (with what it needs: {rest})" if rest else "",
        )
    return target


def pip_message(result: subprocess.CompletedProcess) -> str:
    """What pip said that matters: its ERROR lines, else its last lines."""
    lines = (result.stdout + result.stderr).strip().splitlines()
    errors = [line for line in lines if line.startswith("ERROR")]
    return "\n".join(errors or lines[-PIP_MESSAGE_LINES:])


def needs_own_environment(code_dir: Path) -> bool:
    """On a multi-model endpoint: whether code/ brings anything beside inference.py (its
    handlers then run in processes of their own), known before anything is installed."""
    return (code_dir / REQUIREMENTS_FILE).is_file() or bool(_own_modules(code_dir, None))


def environment_key(code_dir: Path) -> str:
    """A name for what an environment is made of: the code directory, its requirements as
    checked (the files they include), the content of every file they install or search and
    of the wheels it ships (the same key: the environment made before can be used again; a
    wheel rebuilt, even to the same size, makes another). RequirementsError for
    requirements that are not allowed."""
    digest = hashlib.sha256(str(code_dir.resolve()).encode())
    if installs(code_dir):
        requirements = checked.read(code_dir)
        digest.update("\n".join((*requirements.lines, "-c", *requirements.constraints)).encode())
        for path in requirements.local:
            _hash_tree(digest, path)
    digest.update(b"lib" if (code_dir / LIB_DIR).is_dir() else b"-")
    wheelhouse = code_dir / WHEELHOUSE_DIR
    if wheelhouse.is_dir():
        _hash_tree(digest, wheelhouse)
    return digest.hexdigest()[:24]


def _hash_tree(digest: hashlib._Hash, path: Path) -> None:
    """Names and content of a file, or of every file under a folder, into `digest`."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(f"\n{file.relative_to(path) if file != path else file.name}\n".encode())
        with contextlib.suppress(OSError), file.open("rb") as data:
            while chunk := data.read(MIB):
                digest.update(chunk)


IMPORT_FAILED = "import check failed: "  # then the error as JSON: one line, whatever it says
IMPORT_CHECK = f"""
import json, os, signal, sys
from pathlib import Path
from process_utils import die_with_parent
die_with_parent(signal.SIGKILL)  # a worker killed mid-load: its import check with it
if os.getppid() != int(sys.argv[1]):
    sys.exit(3)  # it was killed before that
from sagemaker_serving.environments.hidden import import_handlers
from sagemaker_serving.user_code.loading import UserCodeError
try:
    import_handlers(Path(sys.argv[2]), sys.argv[3], sys.argv[4:])
except UserCodeError as exc:
    print({IMPORT_FAILED!r} + json.dumps(str(exc)), file=sys.stderr)
    sys.exit(3)
"""


def check_import(code_dir: Path, module: str, paths: list[str], timeout_seconds: float) -> None:
    """Import inference.py as the service's workers will, in a process of its own (an import
    that hangs or crashes takes no worker with it; a worker killed meanwhile takes it along).
    UserCodeError with the import's message, UserCodeTimeout past the time."""
    command = [sys.executable, "-c", IMPORT_CHECK, str(os.getpid()), str(code_dir), module, *paths]
    result = run_in_group(command, code_dir, timeout_seconds)
    path = code_dir / INFERENCE_FILE
    if result is None:
        raise UserCodeTimeout(f"importing {path} took over {timeout_seconds:.0f}s")
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith(IMPORT_FAILED)]
        if lines:
            raise UserCodeError(json.loads(lines[-1][len(IMPORT_FAILED) :]))
        said = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        raise UserCodeError(  # a crash: its last words ("Fatal Python error: ...")
            f"importing {path} failed: it {exit_reason(result.returncode)}"
            + (f": {said[-1]}" if said else "")
        )
