"""Nothing outlives serve: a tiny process that SIGKILLs what serve started when serve goes away.

serve starts every child in its own process group and tells the watchdog each group over a pipe
only serve can write to ("+PGID" when it starts one, "-PGID" once it has reaped it and swept its
group; "dPATH" for a temporary directory of serve's). The watchdog also notes, every
SNAPSHOT_SECONDS, every process under serve (serve is a subreaper: orphans of its descendants
stay under it), so what left its group (pip's session, a handler's detached child, a handler
pool's daemon) is known too. When serve is gone, by any signal (SIGKILL included) or by a normal
exit, the pipe reads end-of-file and the watchdog SIGKILLs the groups still listed and the
processes it saw under serve (and whatever is under those now), removes the directories, then
exits. A group holds the leader's helpers too (nginx's workers, gunicorn's workers), which
PR_SET_PDEATHSIG never reached.

serve side: `Watchdog`. The watchdog itself runs this file with the standard library only
(`python -I -S watchdog.py FD SERVE_PID`, process_utils.tree besides): it must start fast.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

if __name__ == "__main__":  # run as a file (-I -S): process_utils is beside sagemaker_serving
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from process_utils import tree

IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)
SNAPSHOT_SECONDS = 0.5
KILL_SECONDS = 5.0  # for the processes under serve, once it is gone


def parse(lines: list[bytes], groups: set[int], directories: list[str]) -> None:
    """Apply "+PGID" / "-PGID" lines to the set of groups to kill, "dPATH" to the directories."""
    for line in lines:
        text = line.strip()
        if text[:2] == b"d/":
            directories.append(os.fsdecode(text[1:]))
            continue
        if len(text) < 2 or not text[1:].isdigit():
            continue
        pgid = int(text[1:])
        if pgid <= 1:
            continue
        if text[:1] == b"+":
            groups.add(pgid)
        elif text[:1] == b"-":
            groups.discard(pgid)


def kill_groups(groups: set[int]) -> None:
    for pgid in sorted(groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def watch(fd: int, serve_pid: int) -> None:
    """Follow the pipe until end-of-file (serve is gone), noting what runs under serve
    meanwhile, then kill what is left."""
    groups: set[int] = set()
    directories: list[str] = []
    seen: list[tree.Proc] = []
    pending = b""
    while True:
        if select.select([fd], [], [], SNAPSHOT_SECONDS)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            parse(lines, groups, directories)
        else:
            seen = [p for p in tree.descendants(serve_pid) if p.pid != os.getpid()]
    kill_groups(groups)
    tree.kill_all(seen, time.monotonic() + KILL_SECONDS)
    for path in directories:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str]) -> int:
    # Signals meant for serve's terminal or group are not for us: we leave when serve does.
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    os.chdir("/")
    watch(int(argv[1]), int(argv[2]))
    return 0


class Watchdog:
    """serve's end: starts the watchdog process and tells it which process groups to kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._directories: list[Path] = []
        self._write_fd: int | None = None
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """(Re)start the watchdog process with the groups known so far."""
        with self._lock:
            self._close()
            read_fd, write_fd = os.pipe()  # neither end is inheritable (O_CLOEXEC)
            try:
                self.proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        "-S",
                        os.path.abspath(__file__),
                        str(read_fd),
                        str(os.getpid()),
                    ],
                    stdin=subprocess.DEVNULL,
                    pass_fds=(read_fd,),  # the read end only: the watchdog must not keep a writer
                    start_new_session=True,  # no terminal or group signal of serve's reaches it
                )
            finally:
                os.close(read_fd)
            self._write_fd = write_fd
            self._send([f"+{pgid}" for pgid in self._groups])
            self._send([f"d{path}" for path in self._directories])

    def track(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send([f"+{pgid}"])

    def forget(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            self._send([f"-{pgid}"])

    def remove_on_exit(self, directory: Path) -> None:
        """Remove this directory (serve's own, temporary) once serve is gone."""
        path = Path(os.path.abspath(directory))
        with self._lock:
            self._directories.append(path)  # removed by stop() in any case
            self._send([f"d{path}"])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Close the pipe: the watchdog kills what is still listed (normally nothing) and exits;
        the directories are gone on return (removed here should it not have finished)."""
        with self._lock:
            self._close()
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for path in self._directories:
            shutil.rmtree(path, ignore_errors=True)

    def _send(self, lines: list[str]) -> None:
        # a line holding a newline (a directory's path) cannot be sent: stop() removes it
        data = "".join(f"{line}\n" for line in lines if "\n" not in line).encode()
        if self._write_fd is None or not data:
            return
        try:
            os.write(self._write_fd, data)  # short lines: atomic below PIPE_BUF
        except BrokenPipeError:
            pass  # the watchdog died: Supervisor.check starts another one with every group

    def _close(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
