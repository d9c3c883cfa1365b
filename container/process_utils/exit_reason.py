"""Why a child process ended, in words: its exit code or signal, and whether the kernel's
out-of-memory killer ended it (a container's memory cgroup counts its kills, so a model too large
for `docker run --memory` is named as such instead of a bare SIGKILL); and the memory there is
to take, within that cgroup's limit (free_memory_bytes)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMINFO = Path("/proc/meminfo")
_NO_LIMIT = 1 << 60  # cgroup v1 reports "no limit" as a huge page-aligned number


def _own_memory_cgroups(root: Path) -> list[Path]:
    """The directories that may hold this process's memory cgroup files: its own cgroup (v1
    memory controller, or v2), then the mount itself (a container sees its cgroup there)."""
    found: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            found.append(root / "memory" / path.lstrip("/"))
        elif controllers == "":
            found.append(root / path.lstrip("/"))
    return [*found, root / "memory", root]


def _read(directory: Path, name: str) -> str | None:
    try:
        return (directory / name).read_text()
    except OSError:
        return None


class MemoryCgroup:
    """The OOM-kill count and memory limit of the cgroup this process runs in (v1 or v2)."""

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.directory: Path | None = None
        for directory in _own_memory_cgroups(root):
            if _read(directory, "memory.events") or _read(directory, "memory.oom_control"):
                self.directory = directory
                break
        self.kills_at_start = self.oom_kills()

    def oom_kills(self) -> int | None:
        if self.directory is None:
            return None
        text = _read(self.directory, "memory.events") or _read(self.directory, "memory.oom_control")
        match = re.search(r"^oom_kill (\d+)$", text or "", re.M)
        return int(match.group(1)) if match else None

    def limit_bytes(self) -> int | None:
        if self.directory is None:
            return None
        text = (
            _read(self.directory, "memory.max")
            or _read(self.directory, "memory.limit_in_bytes")
            or ""
        ).strip()
        if not text.isdigit() or int(text) >= _NO_LIMIT:
            return None
        return int(text)

    def available_bytes(self) -> int | None:
        """What the limit leaves: the limit less what the cgroup uses, its inactive page cache
        (which the kernel reclaims first) not counted, as `docker stats` counts; None without
        a limit."""
        limit = self.limit_bytes()
        if limit is None or self.directory is None:
            return None
        usage = (_read(self.directory, "memory.current") or "").strip() or (
            _read(self.directory, "memory.usage_in_bytes") or ""
        ).strip()
        if not usage.isdigit():
            return None
        stat = _read(self.directory, "memory.stat") or ""
        # v1 lists the cgroup's own inactive_file before total_inactive_file, its whole tree's,
        # which is what the usage counts; v2 has inactive_file, the tree's
        match = re.search(r"^total_inactive_file (\d+)$", stat, re.M) or re.search(
            r"^inactive_file (\d+)$", stat, re.M
        )
        used = int(usage) - (int(match.group(1)) if match else 0)
        return max(0, limit - max(0, used))

    def killed_since_start(self) -> bool:
        kills = self.oom_kills()
        return kills is not None and kills > (self.kills_at_start or 0)


def free_memory_bytes(root: Path = CGROUP_ROOT, meminfo: Path = MEMINFO) -> int:
    """The memory a new load may take: the system's MemAvailable, or what the container's
    memory limit leaves when that is less (`docker run --memory`, where the system's figure is
    the host's)."""
    text = _read(meminfo.parent, meminfo.name) or ""
    match = re.search(r"^MemAvailable:\s+(\d+) kB$", text, re.M)
    bounds = [int(match.group(1)) << 10] if match else []  # (Linux has said so since 3.14)
    within_limit = MemoryCgroup(root).available_bytes()
    if within_limit is not None:
        bounds.append(within_limit)
    return min(bounds, default=_NO_LIMIT)


def memory_size(size: int) -> str:
    """'2.0 GiB' from 1 GiB up, else whole MiB ('150 MiB': '0.1 GiB' says too little)."""
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB"


def exit_reason(returncode: int, memory: MemoryCgroup | None = None) -> str:
    """'exited with code 1', 'was killed by SIGSEGV', or for a SIGKILL that the memory cgroup
    counts as an OOM kill: 'was killed by the kernel's out-of-memory killer (...)'."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    if -returncode == signal.SIGKILL and memory is not None and memory.killed_since_start():
        limit = memory.limit_bytes()
        within = f" of {memory_size(limit)}" if limit else ""
        return (
            f"was killed by the kernel's out-of-memory killer (SIGKILL): out of memory, the "
            f"container's memory limit{within} is too small for it"
        )
    return f"was killed by {name}"
