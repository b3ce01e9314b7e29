"""The code blocks of docs/engines/integrations.md, so the tests run exactly what the docs show."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from divelab.rl.advantages import StepBatch

DOC = Path(__file__).resolve().parents[2] / "docs" / "engines" / "integrations.md"


def example(name: str) -> str:
    """The ```python block right after ``<!-- example:NAME -->``."""
    m = re.search(rf"<!-- example:{re.escape(name)} -->\s*```python\n(.*?)```", DOC.read_text(), re.S)
    if m is None:
        raise KeyError(f"no example {name!r} in {DOC}")
    return m.group(1)


def run_examples(*names: str, ns: dict[str, Any] | None = None) -> dict[str, Any]:
    ns = {} if ns is None else ns
    for name in names:
        exec(compile(example(name), f"{DOC.name}:{name}", "exec"), ns)  # noqa: S102
    return ns


def native_batch(rows: dict, step_reward: list[float]) -> StepBatch:
    """The same steps as divelab's native StepBatch, to compare a trainer's advantages against."""
    traj = {t: i for i, t in enumerate(dict.fromkeys(rows["traj_uid"]))}
    n = len(step_reward)
    last = [i == n - 1 or rows["traj_uid"][i + 1] != rows["traj_uid"][i] for i in range(n)]
    nxt = [None if last[i] else rows["state_key"][i + 1] for i in range(n)]
    return StepBatch(np.array([traj[t] for t in rows["traj_uid"]]), np.zeros(n, dtype=int), np.array(rows["step_id"]),
                     np.array(step_reward), np.array(last), list(rows["state_key"]), nxt)
