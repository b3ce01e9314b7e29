"""The package's import graph: no cycles, and no module imports a reproduction except the runner.

A reproduction (``<system>/reproduce.py`` and its ``reproduce_*.py`` parts) is private to the
runner (``divelab.registry`` loads it): when another module imports it, changing one system's quick
set-up silently changes another's results. Shared set-ups live in their own modules (for example
``divelab.training.g2po.setup``). Import cycles make import order matter and hide such coupling.
The graph is read from the source with ``ast`` (function-level imports included); importing a
submodule through its package (``from pkg import sub``) counts as importing the submodule.
"""

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _graph() -> dict[str, set[str]]:
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                if node.module in mods and len(subs) < len(node.names):
                    edges[m].add(node.module)
                edges[m].update(subs)
            elif isinstance(node, ast.Import):
                edges[m].update(a.name for a in node.names if a.name in mods)
    return edges


def _is_reproduction(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last == "reproduce" or last.startswith("reproduce_")


def test_only_the_runner_imports_a_reproduction():
    offenders = []
    for m, targets in _graph().items():
        for t in targets:
            same_reproduction = _is_reproduction(m) and m.rsplit(".", 1)[0] == t.rsplit(".", 1)[0]
            if _is_reproduction(t) and m != "divelab.registry" and not same_reproduction:
                offenders.append(f"{m} imports {t}")
    assert not offenders, "only divelab.registry may import a reproduction: " + "; ".join(sorted(offenders))


def test_no_import_cycles():
    edges = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_checks_can_fail(tmp_path, monkeypatch):
    # a two-module cycle and a stray reproduction import in a scratch package are both caught
    pkg = tmp_path / "divelab" / "x"
    pkg.mkdir(parents=True)
    (tmp_path / "divelab" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from divelab.x.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from divelab.x.a import g\n")
    (pkg / "reproduce.py").write_text("")
    (pkg / "c.py").write_text("from divelab.x.reproduce import plan\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)

    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles()
    with pytest.raises(AssertionError, match="divelab.x.c imports divelab.x.reproduce"):
        test_only_the_runner_imports_a_reproduction()
