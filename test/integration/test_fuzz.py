"""Hostile input across every route, content type, custom attribute, raw malformed HTTP and the
multi-model API (test/hostile_cases.py): every answer passes the oracle, a neighbour's valid
requests are answered byte for byte meanwhile, and every stack is right afterwards.
scripts/fuzz_stack.py runs the same with 10,000 cases and more."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest

from conftest import serve_stack
from hostile_cases import STACKS, Neighbour, build_models, prepare, stack_env
from hostile_cases import stack_is_right as stacks_are_right

CASES = 600


def _fuzz_script():
    """scripts/fuzz_stack.py, whose fuzz() runs the cases (here CASES of them, seed 0)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_stack.py"
    spec = importlib.util.spec_from_file_location("fuzz_stack", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    models = build_models(root / "models")
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                serve_stack(models[name], tmp_path_factory.mktemp(f"fuzz_{name}"), stack_env(name))
            )
            for name in STACKS
        }
        ports = {name: server.port for name, server in servers.items()}
        prepare(ports)
        yield ports


def test_hostile_input_gets_json_4xx_and_hurts_no_neighbour(ports):
    with Neighbour(ports["fast"]) as neighbour:
        tally = _fuzz_script().fuzz(ports, CASES, check_every=50, random_seed=0)
    print("\n" + tally.table())
    assert tally.cases >= CASES
    assert not tally.violations, tally.table()
    assert neighbour.sent > 0 and not neighbour.wrong, neighbour.wrong
    assert stacks_are_right(ports) is None
