"""The commands of the documentation, so that a test can run each one.

Read from every Markdown file of the documentation (DOC_GLOBS: README.md and the MkDocs pages
under docs/). A command is
- a command of a fenced `sh` (`bash`, `shell`) block: each line that is no comment, with its
  continuation lines (a trailing backslash) and the body of a here-document (`<<'EOF'`);
- a `$ ` line of a fenced `console` block, the same way, and the lines after it up to the next
  `$ ` line as the output it shows (`...` in an output line stands for any text);
- an inline code span that starts as a command does (`make ...`, `.venv/bin/...`, either after
  `NAME=value` assignments: `SAGEMAKER_BIND_TO_PORT=8081 make serve`).
A command is known by its `key`: its first line without a trailing comment or backslash.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

DOC_GLOBS = ("README.md", "docs/**/*.md")
SHELL_BLOCKS = {"sh", "bash", "shell"}
CONSOLE_BLOCKS = {"console"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")
_INLINE = re.compile(r"`((?:[A-Z_][A-Z0-9_]*=[^\s`]+ )*(?:make |\.venv/bin/)[^`]+)`")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_TRAILING_COMMENT = re.compile(r"\s+#\s.*$")


@dataclass(frozen=True)
class DocCommand:
    text: str  # as written: continuation lines and a here-document's body included
    source: str  # "docs/getting-started.md:123"
    section: str = ""  # "docs/getting-started.md: <the heading above it>"
    output: tuple[str, ...] | None = None  # what a console block shows after it
    inline: bool = False

    @property
    def key(self) -> str:
        return command_key(self.text)


@dataclass(frozen=True)
class DocBlock:
    """A fenced block that is no command (e.g. the JSON a command writes)."""

    language: str
    text: str
    source: str


def command_key(text: str) -> str:
    first = " ".join(text.split("\n", 1)[0].split())
    return _TRAILING_COMMENT.sub("", first).removesuffix("\\").strip()


def _unfinished(text: str) -> bool:
    """A backslash at its end, or a quote still open (a JSON argument over several lines)."""
    if text.rstrip().endswith("\\"):
        return True
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return True
    return False


def doc_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in DOC_GLOBS:
        found += sorted(p for p in root.glob(pattern) if p.is_file() and p not in found)
    return found


def _commands(
    lines: list[str], first: int, source: str, section: str, console: bool
) -> list[DocCommand]:
    """The commands of one block's lines (`first`: the file line number of lines[0])."""
    found: list[DocCommand] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        start = i
        if console:
            if not line.startswith("$ "):
                i += 1
                continue
            line = line[2:]
        elif not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        parts = [line]
        while _unfinished("\n".join(parts)) and i + 1 < len(lines):
            i += 1
            parts.append(lines[i])
        heredoc = _HEREDOC.search("\n".join(parts))
        if heredoc:
            while i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
                if lines[i].strip() == heredoc.group(2):
                    break
        i += 1
        output = None
        if console:
            shown: list[str] = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            while shown and not shown[-1].strip():
                shown.pop()
            output = tuple(shown)
        found.append(DocCommand("\n".join(parts), f"{source}:{first + start}", section, output))
    return found


def parse(text: str, name: str) -> tuple[list[DocCommand], list[DocBlock]]:
    """The commands and the other fenced blocks of one Markdown text."""
    commands: list[DocCommand] = []
    blocks: list[DocBlock] = []
    lines = text.splitlines()
    prose = list(lines)  # the text outside fenced blocks, for the inline commands
    sections: list[str] = [f"{name}:"] * len(lines)  # each line's heading
    section = f"{name}:"
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            heading = _HEADING.match(lines[i])
            if heading:
                section = f"{name}: {heading.group(1)}"
            sections[i] = section
            i += 1
            continue
        marker, language = fence.group(2), fence.group(3).lower()
        body_start = i + 1
        end = body_start
        while end < len(lines) and not lines[end].strip().startswith(marker):
            end += 1
        body = lines[body_start:end]
        for j in range(i, min(end + 1, len(lines))):
            prose[j] = ""
        if language in SHELL_BLOCKS or language in CONSOLE_BLOCKS:
            console = language in CONSOLE_BLOCKS
            commands += _commands(body, body_start + 1, name, section, console)
        else:
            blocks.append(DocBlock(language, "\n".join(body), f"{name}:{body_start + 1}"))
        i = end + 1
    joined = "\n".join(prose)
    for m in _INLINE.finditer(joined):
        line = joined.count("\n", 0, m.start())
        text = " ".join(m.group(1).split())  # a span may go on over a line break
        commands.append(DocCommand(text, f"{name}:{line + 1}", sections[line], inline=True))
    commands.sort(key=lambda c: int(c.source.rsplit(":", 1)[1]))
    return commands, blocks


def documented_commands(root: Path) -> list[DocCommand]:
    """Every command of the documentation under `root`, in file and line order."""
    return [c for path in doc_files(root) for c in parse(path.read_text(), _name(path, root))[0]]


def documented_blocks(root: Path) -> list[DocBlock]:
    return [b for path in doc_files(root) for b in parse(path.read_text(), _name(path, root))[1]]


def _name(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def output_matches(expected: tuple[str, ...], actual: str) -> bool:
    """The lines a console block shows against what the command printed; `...` in a shown
    line matches any text there."""
    lines = actual.rstrip("\n").split("\n") if actual.strip() else []
    if len(lines) != len(expected):
        return False
    for want, got in zip(expected, lines, strict=True):
        pattern = ".*".join(re.escape(part) for part in want.split("..."))
        if not re.fullmatch(pattern, got.rstrip()):
            return False
    return True
