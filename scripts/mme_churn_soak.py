"""Multi-model churn soak: thousands of distinct models loaded, invoked and unloaded.

SageMaker loads and unloads models on a multi-model endpoint on demand, so an instance sees a
long stream of distinct names. This starts a multi-model stack on free loopback ports and, for
each of --models distinct names, copies a small model into a directory of its own (as
SageMaker downloads one), loads it, invokes it once and unloads the one before it (at most two
loaded at once), then deletes its directory. Meanwhile a neighbour asks `GET /ping` every
--ping-every seconds. After --warmup models and at the end it measures the model server's
metrics page (bytes and series) and the resident memory of each process group (serve, nginx,
the Python service, the model server).

Passes when every /ping answered 200, the metrics page has no more series at the end than
after the warm-up, and no process group grew by GROWTH_LIMIT or more after it. /ping times
over PING_BUDGET_MS are counted and printed (a machine shared with others makes a few slow
ones; they are figures, not the verdict). Writes perf-results/mme_churn.json, exits 1 on
failure.

    .venv/bin/python scripts/mme_churn_soak.py [--models 2000] [--warmup 100]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "support"))
sys.path.insert(0, str(REPO / "test" / "perf"))

import stack_scripts  # noqa: E402
from loadgen import write_report  # noqa: E402

from conftest import ServeProcess, serve_stack  # noqa: E402
from loopback import RequestLoop, ask  # noqa: E402

GROWTH_LIMIT = 0.10
PING_BUDGET_MS = 100.0
DEADLINE = 120.0  # seconds for any one answer (a load included)
METRICS_PATH = "/monitoring/prometheus/metrics"


class Pinger(RequestLoop):
    """GET /ping every `every` seconds on its own keep-alive connection, until stopped."""

    def __init__(self, port: int, every: float) -> None:
        super().__init__(port, every, DEADLINE)
        self.times_ms: list[float] = []
        self.failures: list[str] = []

    def next_request(self) -> tuple[str, str, bytes | None]:
        return "GET", "/ping", None

    def answered(self, answer: tuple[int, bytes] | str, seconds: float) -> None:
        self.times_ms.append(seconds * 1000)
        if isinstance(answer, str):
            failure = answer
        elif answer[0] != 200:
            failure = f"/ping answered {answer[0]}: {answer[1][:300].decode(errors='replace')}"
        else:
            return
        if len(self.failures) < 20:
            self.failures.append(failure)

    def figures(self) -> dict:
        times = sorted(self.times_ms) or [0.0]
        return {
            "pings": len(self.times_ms),
            "failures": len(self.failures),
            "failure_examples": self.failures,
            "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2),
            "max_ms": round(times[-1], 2),
            f"over_{PING_BUDGET_MS:g}ms": sum(1 for t in times if t > PING_BUDGET_MS),
        }


def metrics_page(server: ServeProcess) -> dict:
    """The model server's Prometheus page: its size and its series (lines with a value)."""
    status, body = ask(server.rest_ports[0], "GET", METRICS_PATH, timeout=DEADLINE)
    assert status == 200, body[:200]
    lines = body.decode().splitlines()
    return {"bytes": len(body), "series": sum(1 for line in lines if line and line[0] != "#")}


def process_groups(server: ServeProcess) -> dict[str, int]:
    """Resident bytes of serve, nginx, the Python service and the model server."""
    serve = psutil.Process(server.proc.pid).memory_info().rss
    return {"serve": serve, **stack_scripts.process_groups(server.proc.pid)}


@dataclass
class Churn:
    """Distinct models through one multi-model stack, at most two loaded at once."""

    server: ServeProcess
    model_root: Path  # the stack's --model-dir
    template: Path  # a model directory each load copies (hard links)
    done: int = 0
    problems: list[str] = field(default_factory=list)

    def _check(self, what: str, status: int, body: bytes) -> None:
        if status != 200 and len(self.problems) < 20:
            self.problems.append(f"{what}: {status} {body[:200]!r}")

    def cycle(self, index: int) -> None:
        """Load model `index` (a directory of its own), invoke it, unload `index - 1`."""
        name = f"churn-{index:05d}"
        shutil.copytree(self.template, self.model_root / name, copy_function=os.link)
        doc = b'{"model_name": "%s", "url": "%s"}' % (name.encode(), name.encode())
        self._check(
            f"load {name}", *ask(self.server.port, "POST", "/models", doc, timeout=DEADLINE)
        )
        invoke = f"/models/{quote(name)}/invoke"
        self._check(
            f"invoke {name}", *ask(self.server.port, "POST", invoke, b"[1.0]", timeout=DEADLINE)
        )
        if index:
            self.unload(index - 1)
        self.done += 1

    def unload(self, index: int) -> None:
        name = f"churn-{index:05d}"
        self._check(
            f"unload {name}", *ask(self.server.port, "DELETE", f"/models/{name}", timeout=DEADLINE)
        )
        shutil.rmtree(self.model_root / name, ignore_errors=True)


def run(server: ServeProcess, root: Path, template: Path, models: int, warmup: int,
        ping_every: float, progress: bool = True) -> dict:  # fmt: skip
    """The soak on a running multi-model `server` whose model directory is `root`."""
    churn = Churn(server, root, template)
    started = time.monotonic()
    with Pinger(server.port, ping_every) as pinger:
        for index in range(models):
            churn.cycle(index)
            if index + 1 == warmup:
                after_warmup = {"page": metrics_page(server), "rss": process_groups(server)}
            if progress and (index + 1) % 100 == 0:
                elapsed = time.monotonic() - started
                print(f"{index + 1} models in {elapsed:.0f} s, page {metrics_page(server)}")
        churn.unload(models - 1)
        end = {"page": metrics_page(server), "rss": process_groups(server)}
    growth = {group: (end["rss"][group] - rss) / rss for group, rss in after_warmup["rss"].items()}
    flat_page = end["page"]["series"] <= after_warmup["page"]["series"]
    flat_memory = all(g < GROWTH_LIMIT for g in growth.values())
    ping = pinger.figures()
    return {
        "models": churn.done,
        "seconds": round(time.monotonic() - started, 1),
        "problems": churn.problems,
        "ping": ping,
        "after_warmup": after_warmup,
        "end": end,
        "rss_growth": {group: round(g, 4) for group, g in growth.items()},
        "ok": not churn.problems and not ping["failures"] and flat_page and flat_memory,
        "flat_page": flat_page,
        "flat_memory": flat_memory,
    }


def build_template(path: Path) -> Path:
    import example_models as em

    em.half_plus_three_tf1(path)
    return path


def main() -> int:
    parser = stack_scripts.script_arguments(
        __doc__, "mme_churn", models=2000, warmup=100, ping_every=0.05
    )
    args = parser.parse_args()
    if not 0 < args.warmup < args.models:
        parser.error("--warmup must be between 0 and --models")
    with tempfile.TemporaryDirectory(prefix="mme-churn-") as tmp:
        root = Path(tmp) / "models"
        root.mkdir()
        template = build_template(Path(tmp) / "template" / "half_plus_three")
        env = {"SAGEMAKER_MULTI_MODEL": "true"}
        with serve_stack(root, Path(tmp), env) as server:
            report = run(server, root, template, args.models, args.warmup, args.ping_every)
    ping, mib = report["ping"], 1 << 20
    print(f"{report['models']} models loaded, invoked and unloaded in {report['seconds']} s")
    print(
        f"/ping: {ping['pings']} answers, {ping['failures']} not 200; p50 {ping['p50_ms']} ms, "
        f"p99 {ping['p99_ms']} ms, max {ping['max_ms']} ms, "
        f"{ping[f'over_{PING_BUDGET_MS:g}ms']} over {PING_BUDGET_MS:g} ms"
    )
    for when in ("after_warmup", "end"):
        page = report[when]["page"]
        print(f"metrics page {when}: {page['bytes']} bytes, {page['series']} series")
    for group, growth in report["rss_growth"].items():
        before, after = report["after_warmup"]["rss"][group], report["end"]["rss"][group]
        print(f"{group:15} {before / mib:8.1f} MiB -> {after / mib:8.1f} MiB ({growth:+.1%})")
    for problem in report["problems"] + ping["failure_examples"]:
        print(f"  {problem}")
    print("PASS" if report["ok"] else "FAIL")
    write_report(report, args.out)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
