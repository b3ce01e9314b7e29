"""A seeded draw of HumanEval tasks, shared by the reproductions that sample problems from it."""

from __future__ import annotations

import numpy as np

from divelab.codetasks.humaneval import Task, load_tasks


def pick_tasks(n: int, seed: int, what: str = "HumanEval tasks") -> list[Task]:
    """``n`` tasks drawn without replacement by ``seed``, in HumanEval's order; ValueError (naming ``what``)
    for an ``n`` outside 1..164."""
    tasks = load_tasks()
    if not 1 <= n <= len(tasks):
        raise ValueError(f"{what}: n must be in 1..{len(tasks)}, got {n}")
    return [tasks[i] for i in sorted(np.random.default_rng(seed).choice(len(tasks), size=n, replace=False).tolist())]
