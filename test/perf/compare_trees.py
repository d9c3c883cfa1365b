"""This tree against another checkout of the project, side by side in one run.

For each row both stacks serve the same model at once, each `serve` from its own tree's venv,
and wrk takes turns on four targets: this tree's model server direct, this tree's front door,
the other tree's model server direct, the other's front door (`--rounds` times, `--seconds`
each; the median of the rounds' ratios). Each tree's ratio is its front door over its own model
server, so a difference between the two ratios is the container's, not the machine's. Also
written: the CPU ms per request of nginx, the Python service and the model server on each
side. Results go to perf-results/compare-<other label>.md and .json.

    .venv/bin/python test/perf/compare_trees.py --other /work/wt-base [--label-other before]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (HERE, REPO / "test", REPO / "test" / "support", REPO / "examples"):
    sys.path.insert(0, str(path))

import wrk_load  # noqa: E402
from perf_report import (  # noqa: E402
    CSV_BODY,
    JPEG_CODE,
    JSON_BODY,
    MODEL,
    PASS_THROUGH,
    Target,
    half_plus_three,
    load_average,
    predict_path,
)
from stack_cpu import cpu_by_part  # noqa: E402

from conftest import SERVE, ServeProcess, serve_stack  # noqa: E402

JSON_LINES_BODY = b"1.0\n2.0\n5.0\n"


@dataclass(frozen=True)
class Case:
    """One row: the model (with or without inference.py), what the client posts, and what
    the same request is when sent to the model server itself."""

    key: str
    label: str
    model: str  # "plain", "pass_through" or "jpeg"
    body: bytes
    content_type: str
    concurrency: int = 16


CASES = (
    Case("json", "JSON, no inference.py", "plain", JSON_BODY, "application/json"),
    Case("csv", "CSV, no inference.py", "plain", CSV_BODY, "text/csv"),
    Case("jsonl", "JSON Lines, no inference.py", "plain", JSON_LINES_BODY, "application/jsonlines"),
    Case("pass16", "Pass-through inference.py", "pass_through", JSON_BODY, "application/json"),
    Case("pass1", "Pass-through, c=1", "pass_through", JSON_BODY, "application/json", 1),
    Case("jpeg", "Classic JPEG inference.py (digits)", "jpeg", b"", "application/x-image"),
)  # fmt: skip


def model_dirs(work: Path, jpeg: bytes) -> dict[str, tuple[Path, str, bytes]]:
    """model kind -> (model dir, default model name, the request the model server is sent)."""
    from _local_endpoint import assemble_model_dir, cached_model

    dirs = {
        "plain": (half_plus_three(work / "plain"), MODEL, JSON_BODY),
        "pass_through": (half_plus_three(work / "pass", PASS_THROUGH), MODEL, JSON_BODY),
    }
    base = cached_model("digits")
    jpeg_dir = assemble_model_dir(work / "jpeg", "digits", base, JPEG_CODE)
    b64 = json.dumps({"instances": [{"b64": base64.b64encode(jpeg).decode()}]})
    dirs["jpeg"] = (jpeg_dir, "digits", b64.encode())
    return dirs


def jpeg_image(work: Path) -> bytes:
    from bench_images import _jpeg_example

    (path, _), *_ = _jpeg_example().write_images("digits", work / "jpeg-images")
    return path.read_bytes()


@contextlib.contextmanager
def both_stacks(
    model_dir: Path, name: str, work: Path, serves: dict[str, str]
) -> Iterator[dict[str, ServeProcess]]:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": name}
    with contextlib.ExitStack() as stack:
        servers = {}
        for side, serve in serves.items():
            tmp = work / f"{model_dir.name}-{side}"
            tmp.mkdir()
            servers[side] = stack.enter_context(serve_stack(model_dir, tmp, env, serve=serve))
        yield servers


def cpu_ms(measured: dict) -> dict[str, float]:
    """CPU ms per request of each part of the stack (the handler processes: `serve`'s)."""
    cpu = measured.get("stack_cpu_ms_per_request", {})
    return {
        part: cpu.get(part, 0.0) for part in ("nginx", "python_service", "model_server", "serve")
    }


def run_case(
    case: Case, servers: dict[str, ServeProcess], name: str, direct_body: bytes, body: bytes,
    args: argparse.Namespace,
) -> dict:  # fmt: skip
    """Both sides of one row in the same rounds: each round measures each tree's model server
    direct and then its front door, the trees' order turned every round (ABBA)."""
    targets = {}
    for side, server in servers.items():
        rest = f"http://127.0.0.1:{server.rest_ports[0]}{predict_path(name)}"
        targets[f"{side}:direct"] = Target(rest, direct_body)
        targets[side] = Target(f"{server.url}/invocations", body, case.content_type)
    for target in targets.values():  # warm-up: connections and caches
        wrk_load.post(target.url, target.body, target.content_type, case.concurrency, 2)
    results: dict[str, list[dict]] = {key: [] for key in targets}
    sides = list(servers)
    for i in range(args.rounds):
        for side in sides if i % 2 == 0 else sides[::-1]:
            pid = servers[side].proc.pid
            for key in (f"{side}:direct", side):
                target = targets[key]
                before = cpu_by_part(pid)
                load = wrk_load.post(
                    target.url, target.body, target.content_type, case.concurrency, args.seconds
                )
                after = cpu_by_part(pid)
                used = {p: after.get(p, 0.0) - before.get(p, 0.0) for p in after}
                results[key].append(
                    {
                        "rps": load.rps,
                        "errors": load.errors,
                        "stack_cpu_ms_per_request": {
                            p: 1000 * t / max(load.requests, 1) for p, t in used.items()
                        },
                    }
                )
    row: dict = {"key": case.key, "label": case.label, "load": load_average(), "sides": {}}
    for side in servers:
        front, direct = results[side], results[f"{side}:direct"]
        errors = sum(m["errors"] for m in front + direct)
        if errors:
            raise SystemExit(f"{errors} failed requests on {side} {case.key}: {front}")
        front_rps = sum(m["rps"] for m in front) / len(front)
        direct_rps = sum(m["rps"] for m in direct) / len(direct)
        cpu = [cpu_ms(m) for m in front]
        by_round = [f["rps"] / d["rps"] for f, d in zip(front, direct, strict=True)]
        row["sides"][side] = {
            "ratio": round(front_rps / direct_rps, 3),
            "median_ratio": round(statistics.median(by_round), 3),
            "rps": round(front_rps, 1),
            "direct_rps": round(direct_rps, 1),
            "ratios_by_round": [round(r, 3) for r in by_round],
            **{
                f"{part}_ms": round(sum(c[part] for c in cpu) / len(cpu), 4)
                for part in ("nginx", "python_service", "model_server", "serve")
            },
        }
    return row


def write_markdown(rows: list[dict], labels: tuple[str, str], path: Path, args) -> None:
    this, other = labels
    lines = [
        f"# {this} against {other}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; wrk, {args.rounds} rounds of "
        f"{args.seconds:g} s per target, the two trees taking turns round by round. Ratio: the "
        "tree's /invocations over its own model server's REST port (the request the container "
        "sends it) measured just before it, the median of the rounds.",
        "",
        f"| Row | {this} | {other} | {this} / {other} | nginx ms/request ({this} / {other}) "
        f"| service ms/request ({this} / {other}) | model server ms/request ({this} / {other}) "
        f"| Ratios by round ({this}; {other}) | Load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        a, b = row["sides"][this], row["sides"][other]
        lines.append(
            f"| {row['label']} | {a['median_ratio']:.3f} | {b['median_ratio']:.3f} "
            f"| {a['median_ratio'] / b['median_ratio']:.3f} "
            f"| {a['nginx_ms']:.3f} / {b['nginx_ms']:.3f} "
            f"| {a['python_service_ms']:.3f} / {b['python_service_ms']:.3f} "
            f"| {a['model_server_ms']:.3f} / {b['model_server_ms']:.3f} "
            f"| {', '.join(map(str, a['ratios_by_round']))}; "
            f"{', '.join(map(str, b['ratios_by_round']))} | {row['load']} |"
        )
    path.write_text("\n".join([*lines, ""]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--other", type=Path, required=True, help="a checkout with its .venv")
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--label-other", default="other tree")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=[c.key for c in CASES])
    parser.add_argument("--out", type=Path, default=REPO / "perf-results")
    args = parser.parse_args()
    other_serve = args.other / ".venv" / "bin" / "serve"
    if not other_serve.exists():
        raise SystemExit(f"{other_serve} is missing: run `make install` in {args.other}")
    serves = {args.label: SERVE, args.label_other: str(other_serve)}
    cases = [c for c in CASES if not args.only or c.key in args.only]
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare-trees-") as tmp:
        work = Path(tmp)
        jpeg = jpeg_image(work)
        dirs = model_dirs(work, jpeg)
        for kind in dict.fromkeys(c.model for c in cases):
            model_dir, name, direct_body = dirs[kind]
            with both_stacks(model_dir, name, work, serves) as servers:
                for case in (c for c in cases if c.model == kind):
                    body = jpeg if kind == "jpeg" else case.body
                    row = run_case(case, servers, name, direct_body, body, args)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"compare-{args.label_other}".replace(" ", "-")
    (args.out / f"{stem}.json").write_text(json.dumps(rows, indent=2) + "\n")
    write_markdown(rows, (args.label, args.label_other), args.out / f"{stem}.md", args)
    print(f"wrote {args.out / stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
