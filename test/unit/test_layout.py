"""The shape of container/: folders are import names, modules stay small, packages stay browsable,
and no module imports itself back through others (static imports, including function-level)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "container"
MAX_MODULE_LINES = 800
MAX_MODULES_PER_FOLDER = 16


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module under container/."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules under container/ that `name` imports (the longest known prefix of each
    target)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    resolved = set()
    for target in targets:
        parts = target.split(".")
        for n in range(len(parts), 0, -1):
            candidate = ".".join(parts[:n])
            if candidate in known:
                if candidate != name:
                    resolved.add(candidate)
                break
    return resolved


def test_folders_are_import_names_and_packages():
    for folder in [SRC, *(p for p in SRC.rglob("*") if p.is_dir())]:
        if folder == SRC or folder.name == "__pycache__" or not any(folder.glob("*.py")):
            continue
        assert (folder / "__init__.py").exists(), f"{folder} holds modules but is no package"
        assert folder.name.isidentifier(), folder


def test_no_module_is_over_the_size_limit():
    long = {
        name: n
        for name, path in modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_folder_holds_too_many_modules():
    crowded = {
        str(folder.relative_to(SRC)): n
        for folder in SRC.rglob("*")
        if folder.is_dir() and (n := len(list(folder.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert not crowded, crowded


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of `graph` closes (each as the path back to its start)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, set())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_cycles():
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    # a package's __init__ importing its own submodules is how packages export: not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    cycles = cycles_in(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def unit(name: str) -> str | None:
    """What a module belongs to for layering: its sub-package, or the top-level module itself
    (`pkg.errors`, `pkg.serve`); None for a package's own __init__ (its exports)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def test_no_import_cycles_between_subpackages():
    """Sub-packages (and top-level modules) form layers: no chain of imports leads from one
    back to itself through others."""
    found = modules()
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        source = unit(name)
        for target in imports(name, path, set(found)):
            goal = unit(target)
            if source is not None and goal is not None and goal != source:
                edges.setdefault(source, set()).add(goal)
    cycles = cycles_in(edges)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_of_three_is_found():
    assert cycles_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles_in({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# The design's top level (the AWS container's), with our one difference: the hosting package
# is container/sagemaker_serving/, as container/sagemaker/ would be imported as `sagemaker`,
# the SageMaker Python SDK's name.
TOP_LEVEL = (
    "docker/Dockerfile",
    "container/sagemaker_serving/serve.py",
    "container/sagemaker_serving/python_service.py",
    "nginx/nginx.conf.j2",
    "nginx/tfs.js",
    "test",
    "scripts",
    "buildspec.yml",
    "setup.py",
    "README.md",
)


def test_the_design_names_the_top_level_entries():
    top = SRC.parent
    missing = [entry for entry in TOP_LEVEL if not (top / entry).exists()]
    assert not missing, missing
    assert not (SRC / "sagemaker").exists(), "a `sagemaker` package would shadow the SDK"
