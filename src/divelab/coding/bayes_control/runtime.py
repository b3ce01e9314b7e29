"""Helpers for using the controller outside the reproduction: task lists and a default calibration."""

from __future__ import annotations

import json
from pathlib import Path

from divelab.codetasks.humaneval import Task, load_tasks, make_task
from divelab.coding.bayes_control.belief import BeliefModel


def load_task_list(ids: str, task_file: Path | None = None) -> list[Task]:
    """HumanEval tasks by id (``"HumanEval/0,HumanEval/3"``) or from a JSONL file in HumanEval format."""
    if task_file is not None:
        out = []
        for n, line in enumerate(Path(task_file).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                d.setdefault("canonical_solution", "")
                out.append(make_task(d))
            except (ValueError, KeyError, SyntaxError) as exc:
                raise ValueError(f"{task_file}:{n}: not a HumanEval-format task (need task_id, prompt, "
                                 f"entry_point, test with check(candidate)): {exc}") from None
        if not out:
            raise ValueError(f"{task_file} holds no tasks")
        return out
    by_id = {t.task_id: t for t in load_tasks()}
    wanted = [s.strip() for s in ids.split(",") if s.strip()]
    missing = [w for w in wanted if w not in by_id]
    if missing or not wanted:
        raise ValueError(f"unknown task ids {missing or ids!r}; allowed: HumanEval/0 .. HumanEval/{len(by_id) - 1}")
    return [by_id[w] for w in wanted]


def default_model(level: float = 0.25, seed: int = 0) -> BeliefModel:
    """A belief model fitted on the smoke-scale HumanEval replay (a few seconds, then cached)."""
    from divelab.coding.bayes_control.pool import PoolConfig, build_pools
    from divelab.coding.bayes_control.replay import GeneratorModel, estimate_model

    tasks = load_tasks()
    pools = build_pools(list(tasks[::20]), PoolConfig(n_single=4, n_double=2), seed=0)
    return estimate_model(pools, level, GeneratorModel(), seed)
