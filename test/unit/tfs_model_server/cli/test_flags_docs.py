"""docs/model-server.md holds the flags tables scripts/flags_table.py prints from `--help`."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO
from tfs_model_server.cli import flags

PAGE = REPO / "docs" / "model-server.md"


def generated() -> str:
    done = subprocess.run(
        [sys.executable, "scripts/flags_table.py"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_model_server_page_holds_the_generated_flags_tables():
    table = generated()
    assert table in PAGE.read_text(), "regenerate with: .venv/bin/python scripts/flags_table.py"


def test_the_tables_have_a_row_for_every_flag_and_no_other():
    rows = [line for line in generated().splitlines() if line.startswith("| `--")]
    named = sorted(line.split("`")[1].removeprefix("--") for line in rows)
    assert named == sorted(flags.FLAG_HELP)  # every flag has its line of --help
