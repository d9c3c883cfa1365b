"""Print pinned requirements from setup.py's INSTALL_REQUIRES for a Docker image build.

setup.py stays the one place pins live; the Dockerfiles ask this script which lines to install.

    python3 image_requirements.py setup.py                        # every runtime pin
    python3 image_requirements.py setup.py --exclude tensorflow   # all but these names
    python3 image_requirements.py setup.py --only tensorflow-serving-api
    python3 image_requirements.py --nvidia-from-report report.json   # CUDA wheels, pinned

Standard library only: it runs in a bare builder stage before anything is installed.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    """PEP 503 name normalisation (Tensorflow_Serving.API -> tensorflow-serving-api)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def install_requires(setup_py: Path) -> list[str]:
    """The INSTALL_REQUIRES list literal of setup.py, read without running setup.py."""
    tree = ast.parse(setup_py.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "INSTALL_REQUIRES" for t in node.targets
        ):
            return [str(item) for item in ast.literal_eval(node.value)]
    raise ValueError(f"{setup_py}: no INSTALL_REQUIRES list")


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalise(match.group(1))


def select(
    requirements: list[str], only: list[str] | None = None, exclude: list[str] | None = None
) -> list[str]:
    """Requirements named in `only` (all when None) and not in `exclude`; unknown names fail."""
    names = {requirement_name(r) for r in requirements}
    wanted = {normalise(n) for n in (only or [])}
    unwanted = {normalise(n) for n in (exclude or [])}
    unknown = (wanted | unwanted) - names
    if unknown:
        raise ValueError(f"not in INSTALL_REQUIRES: {sorted(unknown)}")
    return [
        r
        for r in requirements
        if (not wanted or requirement_name(r) in wanted) and requirement_name(r) not in unwanted
    ]


def nvidia_pins(report: dict) -> list[str]:
    """`name==version` of every nvidia-* wheel in a `pip install --dry-run --report` JSON.

    The GPU image resolves `tensorflow[and-cuda]` at the setup.py pin this way, so its CUDA
    libraries are the ones that TensorFlow release declares, without installing TensorFlow.
    """
    pins = []
    for item in report.get("install", []):
        metadata = item.get("metadata", {})
        name = normalise(str(metadata.get("name", "")))
        if name.startswith("nvidia-"):
            pins.append(f"{name}=={metadata['version']}")
    if not pins:
        raise ValueError("the pip report lists no nvidia-* packages")
    return sorted(pins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setup_py", type=Path, nargs="?")
    parser.add_argument("--only", action="append", help="keep only this name (repeatable)")
    parser.add_argument("--exclude", action="append", help="drop this name (repeatable)")
    parser.add_argument("--nvidia-from-report", type=Path, help="pip --report JSON to read")
    args = parser.parse_args(argv)
    if (args.setup_py is None) == (args.nvidia_from_report is None):
        parser.error("give setup.py or --nvidia-from-report, not both")
    try:
        if args.nvidia_from_report is not None:
            lines = nvidia_pins(json.loads(args.nvidia_from_report.read_text()))
        else:
            lines = select(install_requires(args.setup_py), args.only, args.exclude)
    except ValueError as exc:
        print(f"image_requirements: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
