"""Thousands of hostile requests against the native stack; a table of what came back.

Starts three stacks on free loopback ports (single model on the fast path, user code, and a
multi-model endpoint), sends `--cases` cases from test/hostile_cases.py (hypothesis), with a
neighbour checking known-valid requests byte for byte meanwhile and `/ping` plus a valid
request checked every `--check-every` cases, then prints the outcomes by stack, route and
status class and every oracle violation with an example. Writes perf-results/fuzz.json; exits
1 on any violation.

    .venv/bin/python scripts/fuzz_stack.py [--cases 10000] [--seed 0]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "support"))
sys.path.insert(0, str(REPO / "test" / "perf"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from loadgen import write_report  # noqa: E402
from stack_scripts import script_arguments  # noqa: E402

from conftest import serve_stack  # noqa: E402
from hostile_cases import (  # noqa: E402
    STACKS,
    Neighbour,
    Tally,
    build_models,
    cases,
    prepare,
    run_case,
    stack_env,
    stack_is_right,
)


def fuzz(ports: dict[str, int], count: int, check_every: int, random_seed: int) -> Tally:
    tally = Tally()

    @seed(random_seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def one(case) -> None:
        run_case(ports, case, tally)
        if tally.cases % check_every == 0:
            problem = stack_is_right(ports)
            if problem is not None:
                tally.add(case, "after", f"stack not right afterwards: {problem}")
        if tally.cases % 500 == 0:
            print(f"{tally.cases} cases, {sum(tally.violations.values())} violations", flush=True)

    one()
    return tally


def main() -> int:
    parser = script_arguments(__doc__, "fuzz", cases=10_000, seed=0, check_every=50)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz-stack-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        models = build_models(root / "models")
        servers = {}
        for name in STACKS:
            (root / name).mkdir()
            servers[name] = stack.enter_context(
                serve_stack(models[name], root / name, stack_env(name))
            )
        ports = {name: server.port for name, server in servers.items()}
        prepare(ports)
        with Neighbour(ports["fast"]) as neighbour:
            tally = fuzz(ports, args.cases, args.check_every, args.seed)
        final = stack_is_right(ports)
    print(tally.table())
    print(f"neighbour: {neighbour.sent} valid requests, {len(neighbour.wrong)} wrong answers")
    for wrong in neighbour.wrong:
        print(f"  {wrong}")
    print(f"afterwards: {final or 'every stack answers /ping and a valid request right'}")
    print(f"{tally.cases} cases in {time.monotonic() - started:.0f} s")
    result = {
        **tally.as_json(),
        "neighbour": {"sent": neighbour.sent, "wrong": neighbour.wrong},
        "afterwards": final,
        "seed": args.seed,
    }
    write_report(result, args.out)
    return 1 if tally.violations or neighbour.wrong or final else 0


if __name__ == "__main__":
    sys.exit(main())
