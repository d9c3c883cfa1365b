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
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "perf"))

from conftest import ServeProcess, serve_stack  # noqa: E402
from hostile_cases import PASS_THROUGH  # noqa: E402
from loadgen import bench_arguments, write_report  # noqa: E402

BODY = '{"instances": [1.0, 2.0, 5.0]}'
THREADS = 2
GROWTH_LIMIT = 0.10

# wrk: each thread stops after its share of requests; done() prints one JSON line.
WRK_SCRIPT = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) limit = tonumber(args[1]); count = 0; non2xx = 0 end
wrk.method = "POST"
wrk.body = '%(body)s'
wrk.headers["Content-Type"] = "application/json"
function response(status, headers, body)
  count = count + 1
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
  if count >= limit then wrk.thread:stop() end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("non2xx") end
  local e = summary.errors
  io.write(string.format('SOAK {"requests": %%d, "non2xx": %%d, "connect": %%d, "read": %%d, ' ..
    '"write": %%d, "timeout": %%d, "p99_ms": %%.2f}\\n', summary.requests, bad, e.connect,
    e.read, e.write, e.timeout, latency:percentile(99) / 1000))
end
"""


def process_groups(server: ServeProcess) -> dict[str, int]:
    """Resident bytes of nginx, the Python service and the model server (each with children)."""
    groups = {"nginx": 0, "python-service": 0, "model-server": 0}
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            rss = child.memory_info().rss
        except psutil.Error:
            continue
        if "nginx" in command:
            groups["nginx"] += rss
        elif "sagemaker_serving.service.main" in command:
            groups["python-service"] += rss
        elif "model-server" in command or "model_server" in command:
            groups["model-server"] += rss
    return groups


def run_wrk(url: str, script: Path, requests: int, connections: int, seconds: float) -> dict:
    per_thread = -(-requests // THREADS)
    command = [
        "wrk",
        f"-t{THREADS}",
        f"-c{connections}",
        f"-d{int(seconds)}s",
        "--timeout",
        "30s",
        "-s",
        str(script),
        f"{url}/invocations",
        "--",
        str(per_thread),
    ]
    started = time.monotonic()
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("SOAK "))
    result = json.loads(line[len("SOAK ") :])
    result["wall_seconds"] = time.monotonic() - started
    return result


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


def soak(name: str, server: ServeProcess, script: Path, args: argparse.Namespace) -> dict:
    warm = run_wrk(server.url, script, 10**9, args.connections, args.warmup_seconds)
    rate = warm["requests"] / args.warmup_seconds
    before = process_groups(server)
    time.sleep(1.0)  # the warm-up's last counts
    counted_before = counted(server)
    # wrk runs its whole -d even when every thread has stopped: ask for about what it needs
    seconds = max(10.0, 2.0 * args.requests / max(rate, 1.0) + 5)
    result = run_wrk(server.url, script, args.requests, args.connections, seconds)
    after = process_groups(server)
    errors = sum(result[k] for k in ("non2xx", "connect", "read", "write", "timeout"))
    answered = result["requests"] - result["non2xx"]
    metrics = counted_at_least(server, counted_before + answered) - counted_before
    missing = [k for k, rss in before.items() if not rss]  # a renamed command would hide it
    if missing:
        raise SystemExit(f"{name}: no process found for {missing}")
    growth = {k: (after[k] - before[k]) / before[k] for k in before}
    return {
        "path": name,
        "requests": result["requests"],
        "errors": errors,
        "detail": result,
        "warmup_requests": warm["requests"],
        "warmup_requests_per_second": round(rate, 1),
        "rss_after_warmup_mib": {k: v >> 20 for k, v in before.items()},
        "rss_at_end_mib": {k: v >> 20 for k, v in after.items()},
        "growth": {k: round(v, 4) for k, v in growth.items()},
        "load_average": os.getloadavg()[0],
        "metrics_counted": metrics,  # /metrics' count of what wrk saw answered 200
        "passed": errors == 0
        and metrics >= answered
        and result["requests"] >= args.requests
        and all(v < GROWTH_LIMIT for v in growth.values()),
    }


def main() -> int:
    parser = bench_arguments(__doc__, "soak", seconds=None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup-seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    import example_models as em

    results = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        root = Path(tmp)
        script = root / "soak.lua"
        script.write_text(WRK_SCRIPT % {"body": BODY})
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
                results.append(soak(name, server, script, args))
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
