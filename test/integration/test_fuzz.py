"""Hostile input across every route, content type, custom attribute, raw malformed HTTP and the
multi-model API (test/hostile_cases.py): every answer passes the oracle, a neighbour's valid
requests are answered byte for byte meanwhile, and every stack is right afterwards.
scripts/fuzz_stack.py runs the same with 10,000 cases and more."""

from __future__ import annotations

import contextlib

import pytest

from conftest import serve_stack
from hostile_cases import STACKS, Neighbour, build_models, prepare, stack_env
from hostile_cases import stack_is_right as stacks_are_right
from repo_scripts import load_script

CASES = 600


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
        tally = load_script("fuzz_stack").fuzz(ports, CASES, check_every=50, random_seed=0)
    print("\n" + tally.table())
    assert tally.cases >= CASES
    assert not tally.violations, tally.table()
    assert neighbour.sent > 0 and not neighbour.wrong, neighbour.wrong
    assert stacks_are_right(ports) is None
