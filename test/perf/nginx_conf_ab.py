"""What each part of serve's nginx.conf costs a TF Serving request nginx passes straight to the
model server, on one held stack.

Starts the stack (half_plus_three, no user code) and, beside serve's own nginx, one more nginx
per variant of the very nginx.conf serve wrote, each on a free loopback port, against the same
model server. wrk then posts to the model server direct, serve's nginx and each variant in turn,
--rounds times (interleaved, so all see the same machine), and prints each round's ratios over
direct and their means. Writes perf-results/nginx_conf_ab.json. Not part of `make perf`: run it
when changing the template.

    .venv/bin/python test/perf/nginx_conf_ab.py [--rounds 8] [--seconds 5]
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (HERE, REPO / "test", REPO / "test" / "support", REPO / "examples"):
    sys.path.insert(0, str(path))

import wrk_load  # noqa: E402
from loadgen import bench_arguments, new_report, write_report  # noqa: E402
from perf_report import JSON_BODY, MODEL, fresh, half_plus_three, predict_path  # noqa: E402

from conftest import serve_stack  # noqa: E402
from process_utils.ports import free_port  # noqa: E402
from sagemaker_serving.launcher.nginx_config import find_nginx  # noqa: E402


def _cut(conf: str, pattern: str, replacement: str = "") -> str:
    changed = re.sub(pattern, replacement, conf)
    if changed == conf:
        raise SystemExit(f"the template changed: {pattern!r} is not in nginx.conf")
    return changed


COUNTS = r'access_log "/dev/fd/\d+" sagemaker_counts[^;]*;'  # serve's pipe: not another nginx's


def as_serves(conf: str) -> str:
    """serve's nginx.conf, its request counts written to /dev/null (the pipe is serve's)."""
    return _cut(conf, COUNTS, "access_log /dev/null sagemaker_counts;")


def no_request_counts(conf: str) -> str:
    """Without the line per request /metrics counts nginx's answers from."""
    return _cut(conf, r"\n\s*" + COUNTS, "")


def no_access_logs(conf: str) -> str:
    """Without that line and without the access log on stdout."""
    return _cut(no_request_counts(conf), r"access_log /dev/stdout[^;]*;", "access_log off;")


def no_header_rules(conf: str) -> str:
    """Without the per-client connection limit, the cleared conditional headers, the
    X-Request-Id header and the checks of the request line and headers ($refused)."""
    for pattern in (
        r"\n\s*limit_conn per_client[^;]*;",
        r"\n\s*more_clear_input_headers[^;]*;",
        r"\n\s*add_header X-Request-Id \$req_id always;",
    ):
        conf = _cut(conf, pattern)
    return _cut(as_serves(conf), r"if \(\$refused\) \{", "if ($request_method = NEVER) {")


def no_one_line(conf: str) -> str:
    """Without the sub_filter that puts the model server's answer on one line."""
    return _cut(as_serves(conf), r"\n\s*sub_filter[^;]*;", "")


VARIANTS: dict[str, Callable[[str], str]] = {
    "as_serves": as_serves,
    "no_request_counts": no_request_counts,
    "no_access_logs": no_access_logs,
    "no_header_rules": no_header_rules,
    "no_one_line": no_one_line,
}


@contextlib.contextmanager
def variant_nginx(conf: str, run_dir: Path, work: Path, name: str) -> Iterator[str]:
    """nginx on `conf` moved to a free port (and a pid file of its own); yields its URL."""
    port = free_port()
    conf = _cut(conf, r"listen \S+", f"listen 127.0.0.1:{port}")
    conf = _cut(conf, r'\npid "[^"]+";', f'\npid "{work / name}.pid";')
    path = work / f"{name}.conf"
    path.write_text(conf)
    command = [find_nginx().binary, "-e", "stderr", "-p", str(run_dir), "-c", str(path)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/invocations"
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(Exception):
                wrk_load.post(url, JSON_BODY, "application/json", 1, 1)
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the {name} nginx did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> int:
    parser = bench_arguments(__doc__, "nginx_conf_ab")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    report = new_report(rounds=args.rounds, seconds=args.seconds, ratios={})
    with (
        tempfile.TemporaryDirectory(prefix="nginx-conf-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        work = Path(tmp)
        env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL}
        server = stack.enter_context(
            serve_stack(half_plus_three(work / "model"), fresh(work / "stack"), env)
        )
        conf = (server.run_dir / "nginx.conf").read_text()
        urls = {
            "direct": f"http://127.0.0.1:{server.rest_ports[0]}{predict_path(MODEL)}",
            "ours": f"{server.url}/invocations",
        }
        for name, variant in VARIANTS.items():
            urls[name] = stack.enter_context(
                variant_nginx(variant(conf), server.run_dir, work, name)
            )
        for url in urls.values():  # warm-up
            wrk_load.post(url, JSON_BODY, "application/json", 16, 2)
        rps: dict[str, list[float]] = {name: [] for name in urls}
        for i in range(args.rounds):
            for name, url in urls.items():
                load = wrk_load.post(url, JSON_BODY, "application/json", 16, args.seconds)
                if load.errors:
                    raise SystemExit(f"{load.errors} failed requests on {name}")
                rps[name].append(load.rps)
            direct = rps["direct"][-1]
            print(
                f"round {i}: direct {direct:.0f} req/s, "
                + ", ".join(
                    f"{name} {rps[name][-1] / direct:.3f}" for name in urls if name != "direct"
                ),
                flush=True,
            )
    total_direct = sum(rps["direct"])
    for name in urls:
        if name != "direct":
            report["ratios"][name] = round(sum(rps[name]) / total_direct, 3)
    report["requests_per_second"] = rps
    print("mean ratios over direct: " + ", ".join(f"{k} {v}" for k, v in report["ratios"].items()))
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
