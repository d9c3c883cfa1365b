"""docs/settings.md documents every variable, with the table scripts/settings_table.py prints."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO
from sagemaker_serving.config.settings import VARIABLES

PAGE = REPO / "docs" / "settings.md"


def test_the_settings_page_mentions_every_variable():
    page = PAGE.read_text()
    missing = [v.name for v in VARIABLES if f"`{v.name}`" not in page]
    assert missing == []


def test_the_settings_page_holds_the_generated_table():
    """The documented command, run as written: its table is the page's, row for row."""
    done = subprocess.run(
        [sys.executable, "scripts/settings_table.py"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    table = done.stdout
    assert table.count("\n") == len(VARIABLES) + 2
    assert table in PAGE.read_text(), "regenerate with: .venv/bin/python scripts/settings_table.py"
