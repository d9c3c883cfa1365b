"""Job progress: a rich progress bar (records/s, ETA) on a terminal, plain log lines otherwise.

ETA is by input bytes: a batch of k of a file's n records counts k/n of the file's size.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Protocol

log = logging.getLogger("tfs_batch_transform.progress")


class Progress(Protocol):
    def start(self, files: int, total_bytes: int) -> None: ...
    def advance(self, records: int, nbytes: float) -> None: ...
    def file_done(self, failed: bool) -> None: ...
    def close(self) -> None: ...


class _Counts:
    """Counters shared by both displays (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files = self.files_done = self.failed = self.records = 0
        self.total_bytes = 1
        self.done_bytes = 0.0
        self.started = time.monotonic()

    def start(self, files: int, total_bytes: int) -> None:
        with self.lock:
            self.files, self.total_bytes = files, max(1, total_bytes)
            self.started = time.monotonic()

    def advance(self, records: int, nbytes: float) -> None:
        with self.lock:
            self.records += records
            self.done_bytes += nbytes

    def file_done(self, failed: bool) -> None:
        with self.lock:
            self.files_done += 1
            self.failed += int(failed)

    def rate(self) -> float:
        return self.records / max(1e-9, time.monotonic() - self.started)

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        fraction = min(1.0, self.done_bytes / self.total_bytes)
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else None
        return (
            f"{self.files_done}/{self.files} files ({self.failed} failed), "
            f"{self.records} records, {self.rate():.1f} records/s, {fraction:.0%} of input, "
            f"elapsed {elapsed:.0f} s, ETA {'?' if eta is None else f'{eta:.0f} s'}"
        )


class LogProgress(_Counts):
    """A log line every `interval` seconds (from a daemon thread) and one at the end."""

    def __init__(self, interval: float = 10.0):
        super().__init__()
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def start(self, files: int, total_bytes: int) -> None:
        super().start(files, total_bytes)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            log.info("progress: %s", self.line())

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        log.info("done: %s", self.line())


class RichProgress(_Counts):
    """A rich progress bar on stderr: files, records, records/s and ETA."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        super().__init__()
        self._bar = Bar(
            TextColumn("[bold]batch transform"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[files]}"),
            TextColumn("{task.fields[records]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._bar.add_task("job", total=1, files="", records="", start=False)

    def _refresh(self) -> None:
        self._bar.update(
            self._task,
            completed=self.done_bytes,
            files=f"{self.files_done}/{self.files} files ({self.failed} failed)",
            records=f"{self.records} records {self.rate():.1f}/s",
        )

    def start(self, files: int, total_bytes: int) -> None:
        super().start(files, total_bytes)
        self._bar.update(self._task, total=self.total_bytes)
        self._bar.start()
        self._bar.start_task(self._task)
        self._refresh()

    def advance(self, records: int, nbytes: float) -> None:
        super().advance(records, nbytes)
        self._refresh()

    def file_done(self, failed: bool) -> None:
        super().file_done(failed)
        self._refresh()

    def close(self) -> None:
        self._refresh()
        self._bar.stop()


def make_progress(mode: str = "auto", interval: float = 10.0) -> Progress:
    """`bar` (rich), `log` (lines), or `auto`: the bar when stderr is a terminal."""
    if mode == "bar" or (mode == "auto" and sys.stderr.isatty()):
        return RichProgress()
    return LogProgress(interval)
