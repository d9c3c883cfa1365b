"""CLI: `python -m example_models NAME DEST [--version N]` or `python -m example_models --list`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .registry import MODELS


def main(argv: Sequence[str] | None = None) -> int:
    """Build one example model, print where it went."""
    parser = argparse.ArgumentParser(prog="python -m example_models", description=__doc__)
    parser.add_argument("name", nargs="?", choices=sorted(MODELS), help="model to build")
    parser.add_argument("dest", nargs="?", help="base path; versions go in DEST/<version>/")
    parser.add_argument("--version", type=int, help="version number (default: the model's own)")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        width = max(map(len, MODELS))
        for name, model in MODELS.items():
            print(f"{name:<{width}}  {model.summary}")
        return 0
    if args.name is None or args.dest is None:
        parser.error("NAME and DEST are required (or --list)")
    if args.version is not None and args.version < 0:
        parser.error("--version must be >= 0")
    print(MODELS[args.name].build(args.dest, args.version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
