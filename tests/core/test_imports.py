"""The package's import graph: no cycles, no module imports a reproduction except the runner, and
systems are leaves.

A reproduction (``<system>/reproduce.py`` and its ``reproduce_*.py`` parts) is private to the
runner (``divelab.registry`` loads it): when another module imports it, changing one system's quick
set-up silently changes another's results. For the same reason no system imports another system:
what two systems share lives in an engine (for example the RL test bed presets in
``divelab.rl.presets``, the maze in ``divelab.envs.maze``). Benchmarks and tools may use one system,
but none of them, and no engine, imports a system's private (``_``-prefixed) names. Import cycles
make import order matter and hide such coupling. The graph is read from the source with ``ast``
(function-level imports included); importing a submodule through its package (``from pkg import
sub``) counts as importing the submodule.
"""

import ast
import sys
from pathlib import Path

import pytest

from divelab.registry import SYSTEMS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
SCRIPTS = (ROOT / "benchmarks", ROOT / "tools")  # files that may use a system but are part of none


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


def _system_of(module: str, systems: list[str]) -> str | None:
    """The system a module belongs to: the system's package or anything below it."""
    return next((p for p in systems if module == p or module.startswith(p + ".")), None)


def _imported(path: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` of every absolute import in a file (``name`` None for ``import module``)."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
    return out


def _systems_crossed(src: Path, scripts: tuple[Path, ...], systems: list[str]) -> list[str]:
    """Every import from one system into another (files under ``src``), and every import of a system's
    private name from outside that system (engines under ``src``, and the files under ``scripts``)."""
    offenders = []
    files = [(p, ".".join(p.relative_to(src).with_suffix("").parts)) for p in sorted(src.rglob("*.py"))]
    files += [(p, None) for d in scripts if d.is_dir() for p in sorted(d.rglob("*.py"))]
    for path, module in files:
        own = _system_of(module.removesuffix(".__init__"), systems) if module else None
        where = module or str(path.relative_to(path.parents[1]))
        for target, name in _imported(path):
            # `from divelab.training import g2po` imports the system through its parent package
            full = f"{target}.{name}" if name else target
            other = _system_of(full, systems) or _system_of(target, systems)
            if other is None or other == own:
                continue
            if own is not None:
                offenders.append(f"{where} (system {own}) imports {full} (system {other})")
            elif name and name.startswith("_"):
                offenders.append(f"{where} imports the private name {name} from {target} (system {other})")
    return offenders


def test_systems_are_leaves():
    offenders = _systems_crossed(SRC, SCRIPTS, [s.module for s in SYSTEMS])
    assert not offenders, "what two systems share belongs in an engine: " + "; ".join(offenders)


def test_the_leaf_check_can_fail(tmp_path):
    # two scratch systems, one importing the other, and a script taking one's private name
    for pkg in ("a", "b"):
        (tmp_path / "src" / "divelab" / pkg).mkdir(parents=True)
        (tmp_path / "src" / "divelab" / pkg / "__init__.py").write_text("")
    (tmp_path / "src" / "divelab" / "__init__.py").write_text("")
    (tmp_path / "src" / "divelab" / "a" / "uses.py").write_text("def f():\n    from divelab.b import helper\n")
    (tmp_path / "src" / "divelab" / "a" / "own.py").write_text("from divelab.a.uses import f\n")
    (tmp_path / "src" / "divelab" / "engine.py").write_text("from divelab.b import _hidden\n")
    (tmp_path / "src" / "divelab" / "by_parent.py").write_text("")
    (tmp_path / "src" / "divelab" / "b" / "sib.py").write_text("from divelab import a\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "bench.py").write_text("from divelab.a import public\nfrom divelab.a.uses import _crop\n")
    got = _systems_crossed(tmp_path / "src", (tmp_path / "tools",), ["divelab.a", "divelab.b"])
    assert got == [
        "divelab.a.uses (system divelab.a) imports divelab.b.helper (system divelab.b)",
        "divelab.b.sib (system divelab.b) imports divelab.a (system divelab.a)",
        "divelab.engine imports the private name _hidden from divelab.b (system divelab.b)",
        "tools/bench.py imports the private name _crop from divelab.a.uses (system divelab.a)",
    ]
