"""What an environment held when it was made, to tell whether it changed since.

A multi-model environment is kept after its model's unload, to be used again by the next load
of the same code. Code that ran in it (the model's own handlers, or another model's: they all
run as the stack's user) can leave something behind that every later interpreter runs at
start, a `.pth` file in site-packages; a seal taken when the environment was made (every file's
path, size, mode and modification time) tells that it changed, and it is made again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def seal(root: Path) -> str:
    """A digest of every file and link under `root` (not their bytes: path, size, mode, mtime),
    bytecode caches aside (the interpreter writes them as it imports)."""
    digest = hashlib.sha256()
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f != "__pycache__")  # the interpreter's own
        for name in sorted([*files, *(f for f in folders if os.path.islink(Path(directory, f)))]):
            path = Path(directory, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            relative = os.fsencode(path.relative_to(root))
            digest.update(
                b"%s\0%d\0%o\0%d\n" % (relative, info.st_size, info.st_mode, info.st_mtime_ns)
            )
    return digest.hexdigest()
