"""Print the table of docs/settings.md (Markdown) from the declarations in
sagemaker_serving.config.settings (VARIABLES)."""

from __future__ import annotations

from sagemaker_serving.config.settings import VARIABLES


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_table() -> str:
    """One row per environment variable: name, default, meaning."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {_cell(v.default_text)} | {_cell(v.doc)} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
