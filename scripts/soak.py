"""Soak: 20,000 requests at concurrency 32 with wrk, on the fast path and on the user-code path.

Starts two stacks on free loopback ports (half_plus_three without user code, and with a
pass-through code/inference.py), warms each up (wrk for --warmup-seconds), samples the resident
memory of every process group (nginx master + workers, gunicorn master + workers, the model
server), sends the
requests with wrk (Debian package `wrk`) and samples again. Passes when there is no error
(non-2xx, connect, read, write or timeout) and no group grew by 10 % or more after the warm-up.
Prints the figures, writes perf-results/soak.json, exits 1 on failure.

    .venv/bin/python scripts/soak.py [--requests 20000] [--connections 32]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "support"))
sys.path.insert(0, str(REPO / "test" / "perf"))

import wrk_load  # noqa: E402
from loadgen import write_report  # noqa: E402
from stack_scripts import process_groups, script_arguments  # noqa: E402

from conftest import ServeProcess, serve_stack  # noqa: E402
from hostile_cases import PASS_THROUGH  # noqa: E402

BODY = b'{"instances": [1.0, 2.0, 5.0]}'
GROWTH_LIMIT = 0.10


def counted(server: ServeProcess) -> float:
    """/metrics: /invocations answered 200, over every process that counts."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    pattern = r'sagemaker_requests_total\{[^}]*route="/invocations"[^}]*status="200"[^}]*\} (\S+)'
    return sum(float(value) for value in re.findall(pattern, text))


def counted_at_least(server: ServeProcess, floor: float, seconds: float = 10.0) -> float:
    """Counts arrive within a second or so: poll until `floor` or the deadline."""
    deadline = time.monotonic() + seconds
    while (count := counted(server)) < floor and time.monotonic() < deadline:
        time.sleep(0.2)
    return count


def post(server: ServeProcess, connections: int, seconds: float, **limit: int) -> wrk_load.Load:
    url = f"{server.url}/invocations"
    return wrk_load.post(url, BODY, "application/json", connections, seconds, **limit)


def soak(name: str, server: ServeProcess, args: argparse.Namespace) -> dict:
    warm = post(server, args.connections, args.warmup_seconds)
    rate = warm.rps
    before = process_groups(server.proc.pid)
    time.sleep(1.0)  # the warm-up's last counts
    counted_before = counted(server)
    # wrk runs its whole -d even when every thread has stopped: ask for about what it needs
    seconds = max(10.0, 2.0 * args.requests / max(rate, 1.0) + 5)
    result = post(server, args.connections, seconds, requests=args.requests)
    after = process_groups(server.proc.pid)
    answered = result.requests - result.non200
    metrics = counted_at_least(server, counted_before + answered) - counted_before
    missing = [k for k, rss in before.items() if not rss]  # a renamed command would hide it
    if missing:
        raise SystemExit(f"{name}: no process found for {missing}")
    growth = {k: (after[k] - before[k]) / before[k] for k in before}
    return {
        "path": name,
        "requests": result.requests,
        "errors": result.errors,
        "detail": result.as_dict(),
        "warmup_requests": warm.requests,
        "warmup_requests_per_second": round(rate, 1),
        "rss_after_warmup_mib": {k: v >> 20 for k, v in before.items()},
        "rss_at_end_mib": {k: v >> 20 for k, v in after.items()},
        "growth": {k: round(v, 4) for k, v in growth.items()},
        "load_average": os.getloadavg()[0],
        "metrics_counted": metrics,  # /metrics' count of what wrk saw answered 200
        "passed": result.errors == 0
        and metrics >= answered
        and result.requests >= args.requests
        and all(v < GROWTH_LIMIT for v in growth.values()),
    }


def main() -> int:
    parser = script_arguments(__doc__, "soak", requests=20_000, warmup_seconds=10, connections=32)
    args = parser.parse_args()
    if not wrk_load.available():
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    import example_models as em

    results = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        root = Path(tmp)
        fast = root / "fast"
        em.half_plus_three_tf1(fast / "half_plus_three")
        user = root / "user"
        shutil.copytree(fast, user)
        (user / "code").mkdir()
        (user / "code" / "inference.py").write_text(PASS_THROUGH)
        for name, model_dir in (("fast path", fast), ("user code", user)):
            run = root / f"run-{name.replace(' ', '-')}"
            run.mkdir()
            with serve_stack(model_dir, run) as server:
                results.append(soak(name, server, args))
    for r in results:
        print(
            f"{r['path']}: {r['requests']} requests at concurrency {args.connections}, "
            f"{r['errors']} errors, p99 {r['detail']['p99_ms']} ms, "
            f"{r['warmup_requests_per_second']} req/s in warm-up, load {r['load_average']:.1f}; "
            f"/metrics counted {r['metrics_counted']:.0f}"
        )
        for group, mib in r["rss_after_warmup_mib"].items():
            print(
                f"    {group:15} RSS {mib:5d} MiB after warm-up -> {r['rss_at_end_mib'][group]:5d}"
                f" MiB at the end ({100 * r['growth'].get(group, 0):+.1f} %)"
            )
        print(f"    {'PASS' if r['passed'] else 'FAIL'}")
    write_report({"results": results}, args.out)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
