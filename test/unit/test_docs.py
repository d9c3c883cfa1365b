"""README.md is a landing page: small, and every link in it leads to a page (and a heading)
that exists. The pages under docs/ are checked by `mkdocs build --strict`, which make lint
runs so that its warnings fail the build."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_LIMIT = 8192  # bytes: a page a newcomer reads to the end
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)


def test_readme_is_under_8_kb():
    size = len(README.read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail into docs/"


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's toc slugify)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # no code blocks
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in _HEADING.findall(text)}


def test_every_link_of_the_readme_leads_somewhere():
    broken = []
    for target in _LINK.findall(README.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        page = REPO / path
        if not page.exists() or (anchor and anchor not in anchors(page)):
            broken.append(target)
    assert not broken, broken


def test_the_readme_links_every_documentation_page():
    pages = {p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")}
    linked = {t.partition("#")[0] for t in _LINK.findall(README.read_text())}
    assert pages - {"docs/index.md"} <= linked, sorted(pages - linked)


def test_make_lint_builds_the_site_strictly_where_its_warnings_count():
    """`mkdocs build --strict` fails on the warnings it logs; --quiet would hide them, and a
    broken link would pass."""
    done = subprocess.run(["make", "-n", "-o", ".venv/.installed", "lint"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    build = [line for line in done.stdout.splitlines() if "mkdocs build" in line]
    assert build and "--strict" in build[0], done.stdout
    assert not re.search(r"\s(--quiet|-q)(\s|$)", build[0]), build[0]


def css_rules(text: str) -> dict[str, dict[str, str]]:
    """selector -> {property: value} of a plain stylesheet (no nesting, no at-rules)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", text):
        declarations = dict(
            (name.strip(), value.strip())
            for name, _, value in (d.partition(":") for d in body.split(";") if ":" in d)
        )
        for selector in selectors.split(","):
            rules.setdefault(" ".join(selector.split()), {}).update(declarations)
    return rules


def test_the_site_keeps_names_in_tables_whole_and_wraps_long_commands():
    """Material breaks inline code anywhere (a setting cut mid-word in the settings table)
    and scrolls code blocks (a long command's end out of sight): the site's stylesheet,
    named in mkdocs.yml, undoes both."""
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    rules: dict[str, dict[str, str]] = {}
    for sheet in config.get("extra_css", []):
        rules.update(css_rules((REPO / config["docs_dir"] / sheet).read_text()))
    table_code = rules.get(".md-typeset table code", {})
    assert table_code.get("word-break") == "normal", rules
    assert table_code.get("overflow-wrap") == "normal", rules
    assert rules.get(".md-typeset pre > code", {}).get("white-space") == "pre-wrap", rules
