"""User code that would be ignored: a `code/` folder or an `inference.py` under the model
directory anywhere but where the container reads it (`<model dir>/code/`)."""

from __future__ import annotations

import os
from pathlib import Path

MAX_ENTRIES = 20_000  # folders and files looked at: a model directory is small, a mistake is not


def misplaced_code(model_dir: Path, read_from: Path | None) -> list[Path]:
    """`code` folders and `inference.py` files under `model_dir` other than `read_from` and
    what it holds (None: nothing there is read), sorted; a `code` folder stands for what is
    in it. Hidden folders and symbolic links are not followed."""
    found: list[Path] = []
    seen = 0
    for top, dirs, files in os.walk(model_dir):
        here = Path(top)
        kept = []
        for name in sorted(dirs):
            path = here / name
            if name.startswith(".") or path == read_from or path.is_symlink():
                continue
            if name == "code":
                found.append(path)
            else:
                kept.append(name)
        dirs[:] = kept
        found.extend(here / name for name in files if name == "inference.py")
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            break
    return sorted(found)
