"""exit_reason: an exit code, a signal, and a SIGKILL the memory cgroup counts as an OOM kill."""

from __future__ import annotations

import signal
from pathlib import Path

from process_utils.exit_reason import MemoryCgroup, exit_reason, free_memory_bytes


def cgroup_v1(root: Path, kills: int, limit: int) -> Path:
    memory = root / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "memory.oom_control").write_text(
        f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n"
    )
    (memory / "memory.limit_in_bytes").write_text(f"{limit}\n")
    return memory


def cgroup_v2(root: Path, kills: int, limit: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "memory.events").write_text(
        f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {kills}\noom_group_kill 0\n"
    )
    (root / "memory.max").write_text(f"{limit}\n")


def test_exit_codes_and_signals():
    assert exit_reason(0) == "exited with code 0"
    assert exit_reason(3) == "exited with code 3"
    assert exit_reason(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert exit_reason(-signal.SIGKILL) == "was killed by SIGKILL"


def test_a_sigkill_after_an_oom_kill_in_cgroup_v1_names_the_limit(tmp_path):
    memory = cgroup_v1(tmp_path, kills=0, limit=2 << 30)
    cgroup = MemoryCgroup(tmp_path)
    assert exit_reason(-signal.SIGKILL, cgroup) == "was killed by SIGKILL"  # no kill counted yet
    cgroup_v1(tmp_path, kills=1, limit=2 << 30)
    reason = exit_reason(-signal.SIGKILL, cgroup)
    assert "out-of-memory killer" in reason and "2.0 GiB" in reason, reason
    assert exit_reason(1, cgroup) == "exited with code 1"
    assert memory.is_dir()


def test_a_limit_under_a_gib_is_in_mib(tmp_path):
    """`docker run --memory 150m`: '150 MiB', not '0.1 GiB'."""
    cgroup_v1(tmp_path, kills=0, limit=150 << 20)
    cgroup = MemoryCgroup(tmp_path)
    cgroup_v1(tmp_path, kills=1, limit=150 << 20)
    assert "memory limit of 150 MiB is too small" in exit_reason(-signal.SIGKILL, cgroup)


def test_cgroup_v2_without_a_limit(tmp_path):
    cgroup_v2(tmp_path, kills=4, limit="max")
    cgroup = MemoryCgroup(tmp_path)
    assert exit_reason(-signal.SIGKILL, cgroup) == "was killed by SIGKILL"  # kills before start
    cgroup_v2(tmp_path, kills=5, limit="max")
    reason = exit_reason(-signal.SIGKILL, cgroup)
    assert "out of memory" in reason and "GiB" not in reason, reason


def test_no_memory_cgroup_means_no_guess(tmp_path):
    cgroup = MemoryCgroup(tmp_path / "nothing")
    assert cgroup.oom_kills() is None and cgroup.limit_bytes() is None
    assert exit_reason(-signal.SIGKILL, cgroup) == "was killed by SIGKILL"


def meminfo(tmp_path: Path, available_mib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal: 24000000 kB\nMemAvailable: {available_mib << 10} kB\n")
    return path


def test_free_memory_is_what_the_containers_limit_leaves(tmp_path):
    """`docker run --memory 1200m` on a host with 20 GiB free: a multi-model load is measured
    against the 1200 MiB (its inactive page cache counted as free), not the host's memory."""
    memory = cgroup_v1(tmp_path / "v1", kills=0, limit=1200 << 20)
    (memory / "memory.usage_in_bytes").write_text(f"{1000 << 20}\n")
    (memory / "memory.stat").write_text(
        f"cache 0\ninactive_file {50 << 20}\ntotal_inactive_file {300 << 20}\n"  # v1's order
    )
    host = meminfo(tmp_path, 20 << 10)
    assert free_memory_bytes(tmp_path / "v1", host) == 500 << 20
    cgroup_v2(tmp_path / "v2", kills=0, limit=str(1200 << 20))
    (tmp_path / "v2" / "memory.current").write_text(f"{1100 << 20}\n")
    (tmp_path / "v2" / "memory.stat").write_text(f"anon 1\ninactive_file {100 << 20}\n")
    assert free_memory_bytes(tmp_path / "v2", host) == 200 << 20


def test_free_memory_without_a_limit_is_the_systems(tmp_path):
    cgroup_v2(tmp_path, kills=0, limit="max")
    (tmp_path / "memory.current").write_text(f"{1 << 30}\n")
    assert free_memory_bytes(tmp_path, meminfo(tmp_path, 3000)) == 3000 << 20
    assert free_memory_bytes(tmp_path / "nothing", meminfo(tmp_path, 700)) == 700 << 20
