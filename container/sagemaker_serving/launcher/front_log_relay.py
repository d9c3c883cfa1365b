"""Every request, from nginx's log file to the Python service's /metrics.

nginx appends a line per request when it sends the answer (`route status model seconds`,
whoever made the answer: so a 504 at nginx's timeout counts then, not when the handler
behind it finishes) to FRONT_LOG in the run directory, buffered: one write per FLUSH_MS or
64 KB, where a datagram per request cost nginx and the service a few percent of the fast
path's throughput. serve reads the new whole lines
every POLL_SECONDS and sends them on to the service's metrics socket (front_metrics.py), at
most READ_BYTES at a time: a backlog (serve held up) goes out in steps BACKLOG_SECONDS apart
that the socket's receive buffer holds, rather than in one burst it would drop.

The file is serve's user's, 0600: nginx's master opens it and its workers inherit the
descriptor, so no other user (not even one running as nginx's workers do) reads or writes it.
What was read is freed by punching a hole in the file (its size grows, its disk use does not);
where the file system cannot punch holes, or once the size passes MAX_SIZE, a new file takes its
place and nginx reloads (its new workers open the new file), and the old one is read until
nginx's old workers are gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sagemaker_serving.service.front_metrics import LOOPBACK, reports

log = logging.getLogger(__name__)

FRONT_LOG = "front-requests.log"
FLUSH_MS = 100  # nginx's access_log flush: a count reaches serve within this
POLL_SECONDS = 0.1
READ_BYTES = 128 * 1024  # per step: 4 reports; a few thousand requests
BACKLOG_SECONDS = 0.01  # between steps while a backlog lasts (12 MB/s)
STOP_SECONDS = 5.0  # at stop, for what is left
FREE_BYTES = 1 << 20  # a hole is punched once this much more has been read
ROTATE_BYTES = 64 << 20  # without holes: the file is replaced at this size
MAX_SIZE = 1 << 40  # with holes (ext4 files end at 16 TiB): about 50 days at 6000 requests/s
_PUNCH_HOLE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
_BLOCK = 4096


def nginx_access_log(path: Path) -> str:
    """The nginx directive writing the lines (log_format sagemaker_metrics: the template)."""
    return f"    access_log {path} sagemaker_metrics buffer=64k flush={FLUSH_MS}ms;"


def new_log(path: Path) -> Path:
    """An empty log file for serve's user only (what an earlier run left is dropped)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    return path


def _fallocate() -> Callable[[int, int, int, int], int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _fallocate()


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the file's blocks in [offset, offset + length), size kept; False where the file
    system (or the C library) cannot."""
    if _FALLOCATE is None:
        return False
    if _FALLOCATE(fd, _PUNCH_HOLE, offset, length) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EOPNOTSUPP, errno.ENOSYS):
        return False
    raise OSError(code, os.strerror(code))


class LogTail:
    """The whole lines appended to one file since the last read."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)  # writable: to punch holes
        self.offset = 0  # read up to here
        self.partial = b""  # the last line, still being written
        self.freed = 0  # blocks before this are holes
        self.backlog = False  # the last read stopped at its limit

    def read_lines(self, limit: int) -> list[bytes]:
        """The whole lines of the next `limit` bytes at most (`backlog`: more are waiting)."""
        data = os.pread(self.fd, limit, self.offset)
        self.offset += len(data)
        self.backlog = len(data) == limit
        complete, _, self.partial = (self.partial + data).rpartition(b"\n")
        return [line for line in complete.split(b"\n") if line]

    def free_read_blocks(self) -> bool:
        """Punch out what was read, a FREE_BYTES step at a time; False when holes cannot be
        punched here."""
        done = (self.offset - len(self.partial)) // _BLOCK * _BLOCK
        if done - self.freed < FREE_BYTES:
            return True
        if not punch_hole(self.fd, self.freed, done - self.freed):
            return False
        self.freed = done
        return True

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        os.close(self.fd)


class FrontLogRelay:
    """serve's thread relaying nginx's log lines to the service (reports with `token` to
    `port`); `reload_nginx` makes nginx open the log path afresh, `retire_seconds` bounds how
    long nginx's old workers keep writing to a replaced file."""

    def __init__(
        self,
        path: Path,
        port: int,
        token: str,
        reload_nginx: Callable[[], None],
        retire_seconds: float,
    ) -> None:
        self.path = path
        self.address = (LOOPBACK, port)
        self.token = token
        self.reload_nginx = reload_nginx
        self.retire_seconds = retire_seconds
        self.tail = LogTail(path)
        self.retiring: LogTail | None = None
        self.retire_at = 0.0
        self.holes = True  # until the file system says otherwise
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))  # a sender only: no port open beyond the loopback
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="front-log-relay", daemon=True)

    def start(self) -> FrontLogRelay:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Relay what nginx wrote last (call once nginx has stopped) and close."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(5.0)
        if not self.thread.is_alive():
            deadline = time.monotonic() + STOP_SECONDS
            with contextlib.suppress(OSError):
                self.relay(final=True)
                while self.backlog and time.monotonic() < deadline:
                    time.sleep(BACKLOG_SECONDS)
                    self.relay(final=True)
            self.tail.close()
            if self.retiring is not None:
                self.retiring.close()
        self.sock.close()

    @property
    def backlog(self) -> bool:
        """The last relay stopped at its limit: more lines are waiting."""
        return self.tail.backlog or (self.retiring is not None and self.retiring.backlog)

    def _run(self) -> None:
        while not self._stop.wait(BACKLOG_SECONDS if self.backlog else POLL_SECONDS):
            try:
                self.relay()
            except OSError as exc:
                log.warning("relaying nginx's request log %s: %s", self.path, exc)
                self._stop.wait(1.0)
            except Exception:  # a bug of ours: counts stop, so say so, and go on
                log.exception("relaying nginx's request log %s failed", self.path)
                self._stop.wait(1.0)

    def relay(self, final: bool = False) -> int:
        """Send the whole lines written since the last call, up to READ_BYTES of each file;
        the number of lines. `final`: nginx has stopped, the replaced file can be closed once
        read."""
        lines = []
        if self.retiring is not None:
            lines = self.retiring.read_lines(READ_BYTES)
            gone = final or time.monotonic() >= self.retire_at  # nginx's old workers
            if gone and not self.retiring.backlog:
                self.retiring.close()
                self.retiring = None
        lines += self.tail.read_lines(READ_BYTES)
        for report in reports(self.token, lines):
            self.sock.sendto(report, self.address)
        self._free_or_rotate()
        return len(lines)

    def _free_or_rotate(self) -> None:
        if self.holes and not self.tail.free_read_blocks():
            self.holes = False
            log.info(
                "%s: no holes on this file system: replaced every %d bytes",
                self.path,
                ROTATE_BYTES,
            )
        if self.retiring is None and self.tail.size() > (MAX_SIZE if self.holes else ROTATE_BYTES):
            self._rotate()

    def _rotate(self) -> None:
        """A new file at the path (the open descriptors keep the old one readable until
        closed), which nginx's new workers open."""
        new_log(self.path)
        self.retiring, self.tail = self.tail, LogTail(self.path)
        self.retire_at = time.monotonic() + self.retire_seconds
        self.reload_nginx()
