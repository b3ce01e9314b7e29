"""Candidate pools: the reference solution and its mutants, each labelled by real test runs.

The pool stands in for sampled LLM code: per task, distinct single and double mutants of the
reference solution, run in the sandbox against the docstring examples and every hidden test (one
process per candidate, test by test), plus static checks (``compile``, pyflakes). Labels are cached
per task with :mod:`divelab.cache`, so only the first run pays for the executions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.codetasks.harness import HARNESS_VERSION, Evaluation, evaluate
from divelab.codetasks.humaneval import Task
from divelab.codetasks.mutation import make_mutants
from divelab.progress import make_progress


@dataclass
class Candidate:
    cid: int
    code: str
    operators: str  # "reference" or the mutation operators applied
    evaluation: Evaluation
    syntax_ok: bool
    pyflakes_messages: list[str]
    n_failed: int  # hidden tests failed (the "defects" the refinement model counts)

    @property
    def correct(self) -> bool:
        return self.n_failed == 0

    def to_dict(self) -> dict:
        return {"cid": self.cid, "code": self.code, "operators": self.operators,
                "evaluation": self.evaluation.to_dict(), "syntax_ok": self.syntax_ok,
                "pyflakes_messages": self.pyflakes_messages, "n_failed": self.n_failed}

    @classmethod
    def from_dict(cls, d: dict) -> Candidate:
        return cls(cid=d["cid"], code=d["code"], operators=d["operators"],
                   evaluation=Evaluation.from_dict(d["evaluation"]), syntax_ok=d["syntax_ok"],
                   pyflakes_messages=d["pyflakes_messages"], n_failed=d["n_failed"])


@dataclass
class Pool:
    task: Task
    candidates: list[Candidate]

    @property
    def correct_ids(self) -> list[int]:
        return [c.cid for c in self.candidates if c.correct]

    @property
    def wrong_ids(self) -> list[int]:
        return [c.cid for c in self.candidates if not c.correct]


def syntax_ok(code: str) -> bool:
    try:
        compile(code, "candidate.py", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def pyflakes_messages(code: str) -> list[str]:
    """pyflakes' findings (static analysis: the code is parsed, never run)."""
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    class _Collect(Reporter):
        def __init__(self) -> None:
            self.messages: list[str] = []

        def unexpectedError(self, filename, msg):  # noqa: N802 - pyflakes' API
            self.messages.append(f"error: {msg}")

        def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802
            self.messages.append(f"syntax error line {lineno}: {msg}")

        def flake(self, message):
            self.messages.append(str(message).split(":", 1)[-1].strip())

    rep = _Collect()
    check(code, "candidate.py", rep)
    return rep.messages


@dataclass(frozen=True)
class PoolConfig:
    """Each task's candidate pool: the AST mutants that stand in for sampled code, and how they are labelled."""

    n_single: int = 8
    """single-mutation mutants per task"""
    n_double: int = 4
    """double-mutation mutants per task (a mutant of a single mutant)"""
    per_test_s: float = 0.3
    """time limit of each hidden test or docstring example in the sandbox"""
    workers: int = 2
    """concurrent sandboxes while labelling (speed, not results; this machine has 2 shared cores)"""

    def __post_init__(self) -> None:
        if self.n_single < 0 or self.n_double < 0:
            raise ValueError(f"n_single/n_double must be >= 0, got {self.n_single}/{self.n_double}")
        if not 1 <= self.workers <= 8:
            raise ValueError(f"workers must be in 1..8, got {self.workers}")


def _cache_file(task: Task, cfg: PoolConfig, seed: int):
    key = stable_hash({"task": task.task_id, "canonical": task.canonical, "test": task.test,
                       "n_single": cfg.n_single, "n_double": cfg.n_double, "per_test_s": cfg.per_test_s,
                       "seed": seed, "harness": HARNESS_VERSION})
    return entry_path("bayes-control-pools", key).with_suffix(".json")


def build_pools(tasks: Sequence[Task], cfg: PoolConfig | None = None, seed: int = 0) -> list[Pool]:
    """Labelled pools for ``tasks`` (cached per task; uncached work runs ``cfg.workers`` sandboxes at once)."""
    cfg = cfg or PoolConfig()
    pools: dict[str, Pool] = {}
    todo: list[tuple[Task, int, str, str]] = []  # (task, cid, operators, code)
    for t in tasks:
        f = _cache_file(t, cfg, seed)
        if f.exists():
            data = json.loads(f.read_text())
            pools[t.task_id] = Pool(t, [Candidate.from_dict(c) for c in data["candidates"]])
            continue
        mutants = make_mutants(t.canonical, t.entry_point, cfg.n_single, cfg.n_double,
                               seed=int(stable_hash([seed, t.task_id], 8), 16))
        for cid, (ops, code) in enumerate([("reference", t.canonical), *mutants]):
            todo.append((t, cid, ops, code))
    if todo:
        # Each task's pool is written to the cache as soon as its last candidate is labelled, so an
        # interrupted run resumes where it stopped.
        remaining: dict[str, int] = {}
        for item in todo:
            remaining[item[0].task_id] = remaining.get(item[0].task_id, 0) + 1
        done: dict[str, list[Candidate]] = {tid: [] for tid in remaining}
        by_id = {t.task_id: t for t in tasks}

        def label(item: tuple[Task, int, str, str]) -> Candidate:
            t, cid, ops, code = item
            ev = evaluate(t, code, per_test_s=cfg.per_test_s)
            return Candidate(cid=cid, code=code, operators=ops, evaluation=ev, syntax_ok=syntax_ok(code),
                             pyflakes_messages=pyflakes_messages(code), n_failed=ev.n_failed(t.n_tests))

        with make_progress() as progress, ThreadPoolExecutor(max_workers=cfg.workers) as ex:
            bar = progress.add_task("labelling HumanEval candidates in the sandbox", total=len(todo), info="")
            for item, cand in zip(todo, ex.map(label, todo), strict=True):
                tid = item[0].task_id
                done[tid].append(cand)
                remaining[tid] -= 1
                if remaining[tid] == 0:
                    cands = sorted(done[tid], key=lambda c: c.cid)
                    pools[tid] = Pool(by_id[tid], cands)
                    atomic_write_text(_cache_file(by_id[tid], cfg, seed),
                                      json.dumps({"task": tid, "candidates": [c.to_dict() for c in cands]}))
                progress.advance(bar)
    return [pools[t.task_id] for t in tasks]
