"""The loaded models of a multi-model endpoint: one JSON file every process shares.

`models.json` in the state directory is changed only under an exclusive file lock and
replaced atomically, so every gunicorn worker reads one consistent list without the lock;
serve marks it stale, without the lock, when a model server dies (`invalidate`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path

from process_utils import files
from sagemaker_serving.config.model_discovery import Model
from sagemaker_serving.multimodel.errors import MultiModelError, already_loaded

LOCK_WAIT_SECONDS = 600.0


@dataclass(frozen=True)
class LoadedModel:
    """A model SageMaker loaded: its opaque name, url, and what the model servers call it."""

    name: str
    url: str
    internal_name: str
    base_path: str
    versions: tuple[int, ...]
    handlers: str = ""  # its handler processes' folder, when its code runs in its own
    environment: str = ""  # the folder of its code's environment (multimodel/environments.py)

    def as_model(self) -> Model:
        return Model(self.internal_name, Path(self.base_path), self.versions)

    @property
    def code_dir(self) -> Path:
        """The model's own code/ (inference.py, requirements.txt, lib/), if it has one."""
        return Path(self.url) / "code"


def internal_name(name: str) -> str:
    """A model server name for any string SageMaker sends (names are opaque)."""
    return "mme-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Registry:
    """The loaded models, in a JSON file shared by every process; writes under a lock.

    The file is stamped with the registry's generation: `invalidate` (serve, when a model
    server dies) starts a new one without taking the lock, and from then on every model
    written under an older generation counts as unloaded.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "models.json"
        self.lock_path = state_dir / "models.lock"
        self.generation_path = state_dir / "generation"
        self.loading_dir = state_dir / "loading"

    def locked(self, wait_seconds: float = LOCK_WAIT_SECONDS) -> AbstractContextManager[None]:
        """Hold the lock every change takes (503 when another holds it past `wait_seconds`)."""
        busy = MultiModelError("Another load or unload is still running; try again", 503)
        return files.locked(self.lock_path, time.monotonic() + wait_seconds, busy)

    @contextlib.contextmanager
    def loading(self, name: str) -> Iterator[None]:
        """`name` marked as being loaded, in every process, for the duration: a load of it
        meanwhile is a 409. The mark is a file held locked, so it ends with a loader that
        crashed."""
        self.loading_dir.mkdir(parents=True, exist_ok=True)
        path = self.loading_dir / internal_name(name)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise already_loaded(name) from None
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    break  # the mark is ours (not a file its last holder had just removed)
            os.close(fd)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # before the lock ends: a waiter then makes a new one
            os.close(fd)

    def generation(self) -> str:
        try:
            return self.generation_path.read_text()
        except FileNotFoundError:
            return ""

    def invalidate(self) -> None:
        """Every model counts as unloaded from now on. Takes no lock, so it never waits; the
        next load or unload sends the model servers the list without the old models."""
        files.replace_text(self.generation_path, uuid.uuid4().hex)

    def read(self) -> dict[str, LoadedModel]:
        return self.snapshot()[0]

    def snapshot(self) -> tuple[dict[str, LoadedModel], str, str]:
        """The models of the current generation, that generation (for `write`), and the id of
        the write they come from (with the generation: a stamp that changes whenever they may
        have)."""
        generation = self.generation()
        doc = self._document()
        written = doc.get("written", "")
        if doc.get("generation", "") != generation:
            return {}, generation, written
        return _models(doc), generation, written

    def unloaded_by_a_crash(self) -> dict[str, LoadedModel]:
        """The models a model server's death unloaded (listed under an older generation, and
        not written over since): their handler processes are leftovers."""
        doc = self._document()
        return _models(doc) if doc and doc.get("generation", "") != self.generation() else {}

    def _document(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def write(self, models: dict[str, LoadedModel], generation: str) -> None:
        """Replace the file atomically (readers never see half of it); hold the lock.
        `generation`: the one the change was based on (a model server death since then
        leaves the file stale, so the change counts as lost, as it is on that server)."""
        doc = {
            "generation": generation,
            "written": uuid.uuid4().hex,
            "models": [asdict(m) for m in models.values()],
        }
        files.replace_text(self.path, json.dumps(doc))


def _models(doc: dict) -> dict[str, LoadedModel]:
    return {
        item["name"]: LoadedModel(**{**item, "versions": tuple(item["versions"])})
        for item in doc.get("models", [])
    }
