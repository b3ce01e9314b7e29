"""Record every worker's outcome on every query once (cached), so routers train and evaluate by replay.

The matrix holds, per (query, worker, replicate): the extracted answer, the 0/1 reward and the cost.
Replicates re-ask the same worker with an independent seed (``SkillWorker.with_seed``); workers
without ``with_seed`` are asked once per replicate as they are.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import numpy as np

from divelab.cache import atomic_write_bytes, entry_path, stable_hash
from divelab.chat import user
from divelab.orchestration.fugu.tasks import Task, extract_answer, score
from divelab.orchestration.fugu.workers import Worker
from divelab.progress import track


@dataclass
class Outcomes:
    """``reward``/``cost`` are (N, L, R) float arrays, ``answers`` an (N, L, R) array of str."""

    workers: list[str]
    reward: np.ndarray
    cost: np.ndarray
    answers: np.ndarray

    def rows(self, idx: np.ndarray) -> Outcomes:
        return Outcomes(self.workers, self.reward[idx], self.cost[idx], self.answers[idx])


def _replicate(w: Worker, r: int) -> Worker:
    m = w.model
    if hasattr(m, "with_seed"):
        return Worker(w.name, m.with_seed(r), w.price_in, w.price_out)  # type: ignore[attr-defined]
    return w


def record(tasks: list[Task], workers: list[Worker], replicates: int = 3, *, cache_key: object = None) -> Outcomes:
    """Ask every worker every task ``replicates`` times and score it; cached when ``cache_key`` is given."""
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1, got {replicates}")
    path = None
    if cache_key is not None:
        key = stable_hash([cache_key, [t.prompt for t in tasks], [w.name for w in workers], replicates])
        path = entry_path("fugu-replay", f"{key}.npz")
        if path.exists():
            z = np.load(path, allow_pickle=False)
            return Outcomes(json.loads(str(z["workers"])), z["reward"], z["cost"], z["answers"])
    n, n_workers = len(tasks), len(workers)
    reward, cost = np.zeros((n, n_workers, replicates)), np.zeros((n, n_workers, replicates))
    answers = np.empty((n, n_workers, replicates), dtype=object)
    for r in track(range(replicates), "fugu: recording worker outcomes"):
        pool = [_replicate(w, r) for w in workers]
        for q, t in enumerate(tasks):
            msgs = [user(t.prompt)]
            for i, w in enumerate(pool):
                resp, c = w.call(msgs)
                reward[q, i, r] = score(t, resp.message.content)
                cost[q, i, r] = c
                answers[q, i, r] = extract_answer(resp.message.content)
    out = Outcomes([w.name for w in workers], reward, cost, answers.astype(str))
    if path is not None:
        buf = io.BytesIO()
        np.savez(buf, workers=json.dumps(out.workers), reward=reward, cost=cost, answers=out.answers)
        atomic_write_bytes(path, buf.getvalue())
    return out
