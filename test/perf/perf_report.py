"""The performance report: every path against the model server's own speed, in one run.

`make perf` runs this. HTTP load is `wrk` (wrk_load.py) at concurrency 16 unless said, in
interleaved rounds (direct, then each container path, `--rounds` times, `--seconds` each), so
both sides of a ratio see the same machine; a ratio is the container's requests/s over the
model server's own (the same model server process, its REST port, the request the container
sends it). The Batch Transform rows come from bench_batch_images.py (ResNet-50, random
weights: images/s of a `tfs-batch-transform` job against the model's forward pass in
process). Cold start is `serve` started to its first `/ping` 200, small model, native.

Each figure carries the 1-minute load average at the end of its measurement (a busy machine
lowers both sides of a ratio, but not always equally). Writes perf-results/report.md,
report.json and report.png.

    .venv/bin/python test/perf/perf_report.py [--seconds 10] [--rounds 3] [--images 96]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (HERE, REPO / "test", REPO / "test" / "support", REPO / "examples"):
    sys.path.insert(0, str(path))

import wrk_load  # noqa: E402
from _local_endpoint import assemble_model_dir, cached_model  # noqa: E402
from reference_frontends import minimal_service, plain_proxy  # noqa: E402
from stack_cpu import PARTS, cpu_by_part  # noqa: E402

from conftest import ServeProcess, serve_stack  # noqa: E402
from process_utils.ports import free_port_range  # noqa: E402

RESULTS = REPO / "perf-results"
MODEL = "half_plus_three"
JSON_BODY = b'{"instances": [1.0, 2.0, 5.0]}'
CSV_BODY = b"1.0\n2.0\n5.0\n"
PASS_THROUGH = """
def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    return response.content, context.accept_header
"""
JPEG_CODE = REPO / "examples" / "jpeg_images" / "code"


@dataclass
class Row:
    """One line of the report: a ratio (or seconds), its goal, and how it was measured."""

    key: str
    label: str
    goal: str
    value: float | None = None
    unit: str = "ratio"
    load: float | None = None
    detail: dict = field(default_factory=dict)
    figures: str = ""  # what the ratio divides, as the report shows it
    ceiling: float | None = None  # the cheapest front end of its kind, same run and reference
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # side -> part -> ms/request

    def met(self) -> bool | None:
        if self.value is None:
            return None
        kind, number = self.goal.split(" ")
        return self.value >= float(number) if kind == ">=" else self.value <= float(number)


@dataclass(frozen=True)
class Target:
    """A URL wrk posts `body` to."""

    url: str
    body: bytes
    content_type: str = "application/json"


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def interleaved(
    targets: dict[str, Target],
    concurrency: int,
    seconds: float,
    rounds: int,
    stack_pid: int | None = None,
) -> dict[str, dict]:
    """Each target in turn, `rounds` times; requests/s over all rounds, p50/p99 of the last,
    and (with `stack_pid`, serve's) the stack's CPU ms per request by part over all rounds."""
    totals = {name: [0, 0.0, 0] for name in targets}
    cpu = {name: dict.fromkeys(PARTS, 0.0) for name in targets}
    last: dict[str, wrk_load.Load] = {}
    for target in targets.values():  # warm-up: connections and caches
        wrk_load.post(target.url, target.body, target.content_type, concurrency, 2)
    for _ in range(rounds):
        for name, target in targets.items():
            before = cpu_by_part(stack_pid) if stack_pid else {}
            load = wrk_load.post(target.url, target.body, target.content_type, concurrency, seconds)
            after = cpu_by_part(stack_pid) if stack_pid else {}
            for part in cpu[name] if stack_pid else ():
                cpu[name][part] += after.get(part, 0.0) - before.get(part, 0.0)
            totals[name][0] += load.requests
            totals[name][1] += load.seconds
            totals[name][2] += load.errors
            last[name] = load
    measured: dict[str, dict] = {}
    for name, (requests, elapsed, errors) in totals.items():
        measured[name] = {
            "rps": round(requests / elapsed, 1),
            "errors": errors,
            "p50_ms": last[name].p50_ms,
            "p99_ms": last[name].p99_ms,
        }
        if stack_pid and requests:
            measured[name]["stack_cpu_ms_per_request"] = {
                part: round(1000 * used / requests, 4) for part, used in cpu[name].items()
            }
    return measured


def stack_cpu(measured: dict[str, dict], *sides: str) -> dict[str, dict[str, float]]:
    """{side: {part: CPU ms per request}} of the sides measured on the stack."""
    return {side: measured[side]["stack_cpu_ms_per_request"] for side in sides}


def rates(measured: dict[str, dict], side: str, direct: str = "direct") -> str:
    """Requests/s of `side` and of the model server direct, for the report."""
    return f"{measured[side]['rps']:.0f} / {measured[direct]['rps']:.0f} req/s"


def ratio(measured: dict[str, dict], side: str, direct: str = "direct") -> float:
    errors = measured[side]["errors"] + measured[direct]["errors"]
    if errors:
        raise SystemExit(f"{errors} failed requests measuring {side}: {measured}")
    return round(measured[side]["rps"] / measured[direct]["rps"], 3)


def half_plus_three(dest: Path, code: str | None = None) -> Path:
    import example_models as em

    em.half_plus_three_tf1(dest / MODEL, versions=(1,))
    if code is not None:
        (dest / "code").mkdir()
        (dest / "code" / "inference.py").write_text(code)
    return dest


def fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def http_row(
    key: str, label: str, goal: str, measured: dict[str, dict], side: str, ceiling: str, load: float
) -> Row:
    """`side` over the model server direct in `measured`; the row's ceiling is side `ceiling`
    over it (the cheapest front end of its kind)."""
    return Row(
        key,
        label,
        goal,
        ratio(measured, side),
        load=load,
        detail=measured,
        figures=rates(measured, side),
        ceiling=ratio(measured, ceiling),
        cpu=stack_cpu(measured, side, "direct"),
    )


def predict_path(model: str) -> str:
    return f"/v1/models/{model}:predict"


def direct_target(server: ServeProcess, model: str, body: bytes) -> Target:
    return Target(f"http://127.0.0.1:{server.rest_ports[0]}{predict_path(model)}", body)


JSON_LINES_BODY = b"1.0\n2.0\n5.0\n"
NO_CODE_ROWS = (  # side, body, content type, label, goal
    ("json", JSON_BODY, "application/json", "JSON passed straight on (nginx) / direct", ">= 0.90"),
    ("csv", CSV_BODY, "text/csv", "CSV, plain numbers wrapped by nginx / direct", ">= 0.90"),
    ("jsonl", JSON_LINES_BODY, "application/jsonlines",
     "JSON Lines through the Python service / direct", ">= 0.90"),
)  # fmt: skip


def no_code_rows(work: Path, args: argparse.Namespace) -> list[Row]:
    """Without inference.py: a TF Serving request nginx passes straight to the model server,
    and CSV and JSON Lines, which the Python service converts, against the model server
    direct."""
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL}
    with (
        serve_stack(half_plus_three(work / "fast-model"), fresh(work / "fast"), env) as server,
        plain_proxy(server.rest_ports[0], predict_path(MODEL), JSON_BODY, work) as proxy,
    ):
        targets = {"direct": direct_target(server, MODEL, JSON_BODY)}
        for side, body, content_type, _, _ in NO_CODE_ROWS:
            targets[side] = Target(f"{server.url}/invocations", body, content_type)
        targets["plain_proxy"] = Target(proxy, JSON_BODY)
        measured = interleaved(targets, 16, args.seconds, args.rounds, stack_pid=server.proc.pid)
        load = load_average()
    return [
        http_row(f"{side}_no_code", label, goal, measured, side, "plain_proxy", load)
        for side, _, _, label, goal in NO_CODE_ROWS
    ]


def pass_through_rows(work: Path, args: argparse.Namespace) -> list[Row]:
    """A pass-through inference.py at concurrency 16 and 1 against the model server direct."""
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL}
    model_dir = half_plus_three(work / "user-model", PASS_THROUGH)
    rows = []
    with (
        serve_stack(model_dir, fresh(work / "user"), env) as server,
        minimal_service(server.rest_ports[0], predict_path(MODEL), JSON_BODY, work) as minimal,
    ):
        targets = {
            "direct": direct_target(server, MODEL, JSON_BODY),
            "handler": Target(f"{server.url}/invocations", JSON_BODY),
            "minimal": Target(minimal, JSON_BODY),
        }
        for concurrency, key, goal in ((16, "pass_through", 0.85), (1, "pass_through_c1", 0.75)):
            measured = interleaved(
                targets, concurrency, args.seconds, args.rounds, stack_pid=server.proc.pid
            )
            label = "Pass-through inference.py / direct" + (
                ", concurrency 1" if concurrency == 1 else ""
            )
            goal_text = f">= {goal:.2f}"
            rows.append(
                http_row(key, label, goal_text, measured, "handler", "minimal", load_average())
            )
    return rows


def jpeg_row(work: Path, args: argparse.Namespace) -> Row:
    """The classic JPEG inference.py (digits CNN) against the request it sends the model
    server: {"instances": [{"b64": ...}]}."""
    from bench_images import _jpeg_example

    base = cached_model("digits")
    model_dir = assemble_model_dir(work / "jpeg-model", "digits", base, JPEG_CODE)
    (path, _), *_ = _jpeg_example().write_images("digits", work / "jpeg-images")
    jpeg = path.read_bytes()
    b64 = json.dumps({"instances": [{"b64": base64.b64encode(jpeg).decode()}]}).encode()
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "digits"}
    with (
        serve_stack(model_dir, fresh(work / "jpeg"), env) as server,
        minimal_service(
            server.rest_ports[0], predict_path("digits"), jpeg, work, wrap_b64=True
        ) as minimal,
    ):
        measured = interleaved(
            {
                "direct": direct_target(server, "digits", b64),
                "inference_py": Target(f"{server.url}/invocations", jpeg, "application/x-image"),
                "minimal": Target(minimal, jpeg, "application/x-image"),
            },
            16,
            args.seconds,
            args.rounds,
            stack_pid=server.proc.pid,
        )
        load = load_average()
    label = "Classic JPEG inference.py (digits) / direct"
    return http_row("jpeg_classic", label, ">= 0.90", measured, "inference_py", "minimal", load)


def cold_start_row(work: Path, args: argparse.Namespace) -> Row:
    """`serve` started to its first /ping 200 (polled every 10 ms), median of --starts."""
    model_dir = half_plus_three(work / "cold-model")
    seconds = []
    for i in range(args.starts):
        port, high = free_port_range(5)
        env = {
            "SAGEMAKER_BIND_TO_PORT": str(port),
            "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{high}",
            "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL,
        }
        (work / f"cold-{i}").mkdir()
        started = time.monotonic()
        server = ServeProcess(model_dir, work / f"cold-{i}" / "run", env, work / f"cold-{i}.log")
        try:
            seconds.append(first_ping(server, started))
        finally:
            server.stop()
    return Row(
        "cold_start",
        "Cold start, serve to first /ping 200 (s)",
        "<= 2.0",
        round(statistics.median(seconds), 2),
        unit="s",
        load=load_average(),
        detail={"starts_s": seconds},
        figures=f"starts {min(seconds):.2f}-{max(seconds):.2f} s",
    )


def first_ping(server: ServeProcess, started: float, timeout: float = 120) -> float:
    while time.monotonic() - started < timeout and server.proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{server.url}/ping", timeout=2) as reply:
                if reply.status == 200:
                    return round(time.monotonic() - started, 3)
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"serve did not answer /ping 200 within {timeout} s")


def batch_rows(work: Path, args: argparse.Namespace) -> list[Row]:
    """bench_batch_images.py in a process of its own; its images/s over the forward pass."""
    out = work / "batch_images.json"
    command = [
        sys.executable,
        str(HERE / "bench_batch_images.py"),
        "--images",
        str(args.images),
        "--out",
        str(out),
    ]
    subprocess.run(command, check=True)
    report = json.loads(out.read_text())
    sides = report["sides"]
    forward = sides["forward"]["images_per_second"]
    # a JPEG job cannot beat the model's own serving signature (in-graph decode + forward pass)
    signature = round(sides["forward"]["signature_with_decode"]["per_second"] / forward, 3)
    rows = []
    for side, key, label, goal, ceiling in (
        ("tfrecord", "batch_tfrecord", "TFRecord MultiRecord job / forward pass", ">= 0.97", None),
        (
            "jpeg_batching",
            "batch_jpeg_on",
            "JPEG job, batching on / forward pass",
            ">= 0.95",
            signature,
        ),
        ("jpeg", "batch_jpeg_off", "JPEG job, batching off / forward pass", ">= 0.85", signature),
    ):
        rows.append(
            Row(
                key,
                label,
                goal,
                round(sides[side]["images_per_second"] / forward, 3),
                load=sides[side]["load_after"],
                detail={
                    "images_per_second": sides[side]["images_per_second"],
                    "forward_images_per_second": forward,
                },
                figures=f"{sides[side]['images_per_second']:.2f} / {forward:.2f} images/s",
                ceiling=ceiling,
            )
        )
    return rows


def write_markdown(rows: list[Row], path: Path, args: argparse.Namespace) -> None:
    lines = [
        "# Performance report",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, {platform_line()}; "
        f"`wrk` at concurrency 16 unless said, {args.rounds} interleaved rounds of "
        f"{args.seconds:g} s per side; ResNet-50 jobs of {args.images} images.",
        "",
        "| Path | Figure | Goal | Met | Measured (ours / reference) | Load average | Ceiling |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        value = (
            "n/a" if row.value is None else f"{row.value:.3f}" + (" s" if row.unit == "s" else "")
        )
        met = {True: "yes", False: "no", None: "n/a"}[row.met()]
        ceiling = "-" if row.ceiling is None else f"{row.ceiling:.3f}"
        lines.append(
            f"| {row.label} | {value} | {row.goal} | {met} | {row.figures} | {row.load} "
            f"| {ceiling} |"
        )
    lines += ["", CEILINGS, "", *cpu_table(rows), "![ratios](report.png)", ""]
    path.write_text("\n".join(lines))


def cpu_table(rows: list[Row]) -> list[str]:
    """Where the time goes: the stack's CPU ms per request by part, on our side of each HTTP
    row and with the model server reached directly, from the same rounds."""
    lines = [
        "CPU ms per request of the stack's processes (/proc, over all rounds): ours, and the "
        "model server reached directly.",
        "",
        "| Path | nginx | Python service | Model server | Model server direct |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if not row.cpu:
            continue
        ours, direct = row.cpu.values()  # stack_cpu(measured, ours, "direct")
        lines.append(
            f"| {row.label} | {ours['nginx']:.3f} | {ours['python_service']:.3f} "
            f"| {ours['model_server']:.3f} | {direct['model_server']:.3f} |"
        )
    return [*lines, ""]


CEILINGS = """\
Ceiling: the same ratio for the cheapest front end of the row's kind, measured in the same \
interleaved rounds (test/perf/reference_frontends.py). Rows without inference.py: nginx \
proxying a TF Serving request to the model server with nothing else (no njs, logs or header \
rules), so no nginx front door can do better. inference.py rows: falcon's ASGI app on \
gunicorn (the service's worker class and workers) forwarding the body to the model server \
from the event loop and returning its answer, with no nginx in front and no formats, user \
code, metrics or error handling. JPEG jobs: the model's own serving signature (in-graph JPEG \
decode + forward pass) in process."""


def platform_line() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def draw_chart(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = [r for r in rows if r.unit == "ratio" and r.value is not None]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(ratios) + 1.5))
    labels = [r.label for r in ratios]
    colours = ["#396" if r.met() else "#c63" for r in ratios]
    bars = ax.barh(labels, [r.value for r in ratios], color=colours)
    ax.bar_label(bars, fmt="%.2f", padding=3)
    for i, r in enumerate(ratios):
        goal = float(r.goal.split(" ")[1])
        ax.plot([goal, goal], [i - 0.4, i + 0.4], color="black", linewidth=2)
        if r.ceiling is not None:
            ax.plot([r.ceiling, r.ceiling], [i - 0.4, i + 0.4], color="#888", linestyle=":")
    ax.set_xlim(0, 1.15)
    ax.invert_yaxis()
    ax.set_xlabel(
        "container / model server's own speed\n(black mark: goal, dotted: ceiling of its kind)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


STAGES: dict[str, Callable[[Path, argparse.Namespace], list[Row]]] = {
    "fast": no_code_rows,
    "user": pass_through_rows,
    "jpeg": lambda work, args: [jpeg_row(work, args)],
    "batch": batch_rows,
    "cold": lambda work, args: [cold_start_row(work, args)],
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="per wrk round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=96, help="images per Batch Transform job")
    parser.add_argument("--starts", type=int, default=5, help="cold starts (median)")
    parser.add_argument("--only", nargs="+", choices=list(STAGES), default=list(STAGES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not wrk_load.available():
        print("wrk is not installed (apt-get install wrk; make install does)", file=sys.stderr)
        return 2
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="perf-report-") as tmp:
        for name in args.only:
            work = Path(tmp) / name
            work.mkdir()
            for row in STAGES[name](work, args):
                rows.append(row)
                print(f"{row.label}: {row.value} (goal {row.goal}, load {row.load})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(
        json.dumps([row.__dict__ for row in rows], indent=2) + "\n"
    )
    write_markdown(rows, args.out / "report.md", args)
    draw_chart(rows, args.out / "report.png")
    print(f"wrote {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
