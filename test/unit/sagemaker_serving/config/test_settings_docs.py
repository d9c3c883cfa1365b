"""The README "Settings" table documents every variable and is the generated one."""

from __future__ import annotations

import runpy

from conftest import REPO
from sagemaker_serving.config.settings import VARIABLES


def test_readme_mentions_every_variable():
    readme = (REPO / "README.md").read_text()
    missing = [v.name for v in VARIABLES if f"`{v.name}`" not in readme]
    assert missing == []


def test_readme_table_is_up_to_date():
    script = runpy.run_path(str(REPO / "scripts" / "settings_table.py"), run_name="settings_table")
    table = script["settings_table"]()
    assert table.count("\n") == len(VARIABLES) + 2
    readme = (REPO / "README.md").read_text()
    assert table in readme, "regenerate with: .venv/bin/python scripts/settings_table.py"
