"""The coding systems are leaves: what bayes-control, SHERLOC and the Red Queen program world share (HumanEval
tasks, the sandboxed harness, the mutation operators) lives in the divelab.codetasks engine, and none of them
imports another system (read statically, nothing is executed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from divelab import registry

SRC = Path(__file__).resolve().parents[2] / "src"
SYSTEMS = sorted({s.module for s in registry.SYSTEMS})


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _system_of(name: str) -> str | None:
    return next((s for s in SYSTEMS if name == s or name.startswith(s + ".")), None)


@pytest.mark.parametrize("package", ["divelab.coding.bayes_control", "divelab.coding.sherloc",
                                     "divelab.selfimprove.red_queen", "divelab.codetasks"])
def test_imports_no_other_system(package):
    files = sorted(SRC.joinpath(*package.split(".")).rglob("*.py"))
    assert files
    crossing = [f"{f.relative_to(SRC)} imports {name}" for f in files for name in sorted(_imports(f))
                if _system_of(name) not in (None, _system_of(package))]
    assert not crossing, crossing


def test_the_engine_serves_all_three():
    from divelab.codetasks import apply_mutation, evaluate, load_tasks, make_mutants, mutation_sites

    task = load_tasks()[0]
    sites = mutation_sites(task.canonical, task.entry_point)
    mutant = apply_mutation(task.canonical, task.entry_point, sites[0][:2])
    assert mutant is not None and mutant != task.canonical
    assert make_mutants(task.canonical, task.entry_point, 2, 0, seed=0)
    assert callable(evaluate)
