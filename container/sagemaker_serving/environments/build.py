"""A `code/` directory made ready to run: its requirements installed, and where it runs.

`requirements.txt` goes into a virtual environment of its own (`ENV_DIR/venv`) whose
interpreter sees the container's visible packages behind its own (`visible.link_site`, named
in a `.pth` file): pip installs only what is missing or pinned differently. A package that
user code asks for and the container has installed but hides from it (TensorFlow, pillow) is
linked in too (`ENV_DIR/linked`), so pip finds it there instead of downloading it again.

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
import logging
import os
import shutil
import signal
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from sagemaker_serving.environments import visible
from sagemaker_serving.user_code.loading import INFERENCE_FILE, UserCodeError, UserCodeTimeout

log = logging.getLogger(__name__)

REQUIREMENTS_FILE = "requirements.txt"
LIB_DIR = "lib"
WHEELHOUSE_DIR = "wheelhouse"
CONTAINER_PTH = "_sagemaker_container.pth"
PIP_MESSAGE_LINES = 15


def has_user_code(code_dir: Path) -> bool:
    """The Python service runs when code/ holds any of inference.py, requirements.txt, lib/."""
    return any((code_dir / name).exists() for name in (INFERENCE_FILE, REQUIREMENTS_FILE, LIB_DIR))


@dataclass(frozen=True)
class Environment:
    """A code directory ready to import: the directories it imports from (first wins), and
    whether its handlers need processes of their own (`python`: their interpreter)."""

    code_dir: Path
    paths: tuple[str, ...]
    python: str | None = None  # set: a handler pool on this interpreter, else in-process
    reason: str = ""

    @property
    def own_process(self) -> bool:
        return self.python is not None


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
) -> Environment:
    """Install code/requirements.txt (unless code/lib is there, as in the AWS container) and
    decide where the handlers run. `shared_process`: others' handlers may share the service's
    processes (multi-model), so only code that brings nothing of its own runs there.
    Raises UserCodeError (pip's message) or UserCodeTimeout."""
    code_dir = code_dir.absolute()
    lib = code_dir / LIB_DIR
    requirements = code_dir / REQUIREMENTS_FILE
    install = requirements.is_file() and not lib.is_dir()
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
        site_packages, linked = _install(requirements, env_dir, site, timeout_seconds)
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
    if site_packages is None:
        site_packages = _create_venv(env_dir / "venv", site)
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


def _create_venv(root: Path, site: Path) -> Path:
    """A virtual environment without pip whose interpreter sees `site` behind its own
    site-packages; returns that site-packages."""
    shutil.rmtree(root, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = root / "lib" / version / "site-packages"
    (site_packages / CONTAINER_PTH).write_text(f"{site}\n{root.parent / 'linked'}\n")
    return site_packages


def _install(
    requirements: Path, env_dir: Path, site: Path, timeout_seconds: float
) -> tuple[Path, Path]:
    """pip install -r requirements.txt into a new environment; (its site-packages, the folder
    of the container's hidden packages it asks for)."""
    shutil.rmtree(env_dir, ignore_errors=True)
    env_dir.mkdir(parents=True)
    site_packages = _create_venv(env_dir / "venv", site)
    linked = _link_asked_for(requirements, env_dir / "linked")
    code_dir = requirements.parent
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
        str(requirements),
    ]
    wheelhouse = code_dir / WHEELHOUSE_DIR
    if wheelhouse.is_dir():  # shipped wheels: no index (endpoints in network isolation)
        command += ["--no-index", "--find-links", str(wheelhouse)]
    log.info("installing %s into %s", requirements, env_dir / "venv")
    result = run_in_group(command, code_dir, timeout_seconds)
    if result is None:
        raise UserCodeTimeout(
            f"pip install -r code/{REQUIREMENTS_FILE} did not finish within {timeout_seconds:.0f}s"
        )
    if result.returncode != 0:
        log.error("pip install -r %s failed:\n%s", requirements, result.stdout + result.stderr)
        # pip names files by their absolute paths: the code's own relative to the model,
        # the environment's by what they are (no answer names an internal folder)
        said = pip_message(result)
        for path, name in ((site_packages, "site-packages"), (env_dir, "environment")):
            said = said.replace(str(path), name)
        said = said.replace(f"{code_dir.absolute()}/", "code/")
        raise UserCodeError(f"pip install -r code/{REQUIREMENTS_FILE} failed:\n{said}")
    installed = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in importlib.metadata.distributions(path=[str(site_packages)])
    )
    log.info("%s: installed %s", requirements, ", ".join(installed) or "nothing new")
    return site_packages, linked


def run_in_group(
    command: list[str], cwd: Path, timeout_seconds: float
) -> subprocess.CompletedProcess | None:
    """A command in a process group of its own (`pip --python` starts pip again under the
    environment's interpreter): the whole group is killed past the timeout (None), or when
    the wait is interrupted (serve told to stop), so nothing it started outlives it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_seconds)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            return None
        raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _link_asked_for(requirements: Path, target: Path) -> Path:
    """Links to the container's hidden distributions requirements.txt names (and what they
    need), so pip finds them installed; pip still installs another version where asked."""
    try:
        lines = requirements.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    asked = set(visible.requirement_names(lines))
    hidden = visible.closure(asked) - visible.visible_distributions()
    visible.link_site(target, hidden)
    if hidden:
        named = ", ".join(sorted(hidden & asked))
        rest = ", ".join(sorted(hidden - asked))
        log.info(
            "%s: the container's %s used as installed%s",
            requirements,
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
    """A name for what an environment is made of: the code directory, its requirements and
    the wheels it ships (the same key: the environment made before can be used again)."""
    digest = hashlib.sha256(str(code_dir.resolve()).encode())
    requirements = code_dir / REQUIREMENTS_FILE
    if requirements.is_file():
        digest.update(requirements.read_bytes())
    digest.update(b"lib" if (code_dir / LIB_DIR).is_dir() else b"-")
    wheelhouse = code_dir / WHEELHOUSE_DIR
    if wheelhouse.is_dir():
        for wheel in sorted(wheelhouse.iterdir()):
            try:
                size = wheel.stat().st_size
            except OSError:  # a link that leads nowhere or loops: pip says so if it needs it
                size = -1
            digest.update(f"{wheel.name}:{size}".encode())
    return digest.hexdigest()[:24]


IMPORT_CHECK = """
import sys
from pathlib import Path
from sagemaker_serving.environments.hidden import import_handlers
from sagemaker_serving.user_code.loading import UserCodeError
try:
    import_handlers(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
except UserCodeError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""


def check_import(code_dir: Path, module: str, paths: list[str], timeout_seconds: float) -> None:
    """Import inference.py as the service's workers will, in a process of its own (an import
    that hangs or crashes takes no worker with it). UserCodeError with the import's message,
    UserCodeTimeout past the time."""
    command = [sys.executable, "-c", IMPORT_CHECK, str(code_dir), module, *paths]
    result = run_in_group(command, code_dir, timeout_seconds)
    if result is None:
        raise UserCodeTimeout(f"importing code/inference.py took over {timeout_seconds:.0f}s")
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise UserCodeError(lines[-1] if lines else "importing code/inference.py failed")
