"""Print the flags tables of docs/model-server.md (Markdown) from `tfs-model-server --help`.

The model server's own usage text (one line per flag: `--name=default`, its type, what it does)
is the source, so the page says what the command says. Two tables: the flags this server acts
on, and those it accepts only so that command lines written for tensorflow_model_server run
unchanged. A default that depends on the machine is written as its rule (CPU_DEPENDENT), after
checking that the rule gives the value printed here.
"""

from __future__ import annotations

import os
import subprocess
import sys

IGNORED_MARK = "accepted, ignored here"
# flag -> (its default as a rule, the value the rule gives on this machine)
CPU_DEPENDENT = {
    "rest_api_num_threads": ("4 x CPUs", 4 * (os.cpu_count() or 1)),
    "grpc_max_threads": ("4 x CPUs", 4 * (os.cpu_count() or 1)),
    "num_tflite_pools": ("CPUs", os.cpu_count() or 1),
}


def usage_lines() -> list[tuple[str, str, str, str]]:
    """(name, default, type, meaning) of each flag, from `python -m tfs_model_server --help`
    (which exits 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "tfs_model_server", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout.startswith("usage:"):
        raise SystemExit(f"tfs-model-server --help: exit {done.returncode}\n{done.stderr}")
    rows = []
    for line in done.stdout.splitlines()[2:]:
        flag, kind, meaning = (part.strip() for part in line.strip().split("\t"))
        name, _, default = flag.removeprefix("--").partition("=")
        rows.append((name, default, kind, meaning))
    return rows


def _default(name: str, printed: str) -> str:
    """A default as a code span, or the rule of a machine-dependent one."""
    if name not in CPU_DEPENDENT:
        return f"`{_cell(printed)}`"
    rule, value = CPU_DEPENDENT[name]
    if printed != str(value):
        raise SystemExit(f"--{name} defaults to {printed} here, not {rule} ({value})")
    return rule


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def flags_table() -> str:
    """The flags this server acts on, then those it accepts and ignores."""
    rows = usage_lines()
    used = [r for r in rows if not r[3].startswith(IGNORED_MARK)]
    ignored = [r for r in rows if r[3].startswith(IGNORED_MARK)]
    out = ["| Flag | Default | Type | Meaning |", "|---|---|---|---|"]
    out += [
        f"| `--{name}` | {_default(name, default)} | {kind} | {_cell(meaning)} |"
        for name, default, kind, meaning in used
    ]
    out += ["", "Accepted so that command lines written for `tensorflow_model_server` run "
            "unchanged, and ignored (a value other than the default is logged):", "",
            "| Flag | Default | Why it is ignored |", "|---|---|---|"]  # fmt: skip
    for name, default, _kind, meaning in ignored:
        why = meaning.removeprefix(IGNORED_MARK).lstrip(": ") or "no effect here"
        out.append(f"| `--{name}` | `{_cell(default)}` | {_cell(why)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(flags_table(), end="")
