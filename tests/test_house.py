"""The package's shape: its imports form no cycle (every arrow points down the layers), and no
module is over MAX_LINES lines. CPU only: the modules are parsed, not imported."""
from __future__ import annotations

import ast
from pathlib import Path

import gemm_ladder

PACKAGE = Path(gemm_ladder.__file__).resolve().parent
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every gemm_ladder module `path` imports, anywhere in the file (module level and inside
    functions), relative imports resolved; `from pkg import mod` counts as mod."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # gemm_ladder.x.y.NAME -> the module that holds NAME
                t = t.rpartition(".")[0]
            if t and t.startswith("gemm_ladder") and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_names_a_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_imports_inside_functions_and_relative_imports_count(tmp_path):
    known = {"gemm_ladder.x", "gemm_ladder.x.a", "gemm_ladder.x.b", "gemm_ladder.y", "gemm_ladder.y.c"}
    src = tmp_path / "a.py"
    src.write_text("from . import b\n\ndef f():\n    from ..y.c import NAME\n")
    assert imports_of("gemm_ladder.x.a", src, known) == {"gemm_ladder.x.b", "gemm_ladder.y.c"}


def test_layers_point_down():
    """cli -> measure, choreography -> library -> families -> cuda: no layer imports one above it."""
    order = ["cuda", "families", "library", "choreography", "measure", "cli"]
    rank = {layer: i for i, layer in enumerate(order)}
    upward = []
    for name, deps in graph().items():
        layer = name.split(".")[1] if name.count(".") else None
        for d in deps:
            dl = d.split(".")[1] if d.count(".") else None
            if layer in rank and dl in rank and rank[dl] > rank[layer] and rank[layer] < rank["choreography"]:
                upward.append(f"{name} -> {d}")
    assert not upward, "imports that point up the layers: " + ", ".join(sorted(upward))


def test_no_module_over_max_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: " + ", ".join(f"{k} ({v})" for k, v in sorted(long.items()))
