"""Scoring recovery: which known strategy does a theory behave like?

A theory counts as recovering a ground truth when, on a fixed probe battery it never saw (pairs
chosen to separate the known strategies), its simulated behaviour — the choice rate on every
probe pair plus the repeat rate — is nearer to that strategy's than to any other's
(behavioural equivalence: two programs that behave alike are the same theory here).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from divelab.science.autocog.metrics import pair_rates
from divelab.science.autocog.simulate import ChoiceModel, Data, simulate, static_prob_a
from divelab.science.autocog.strategies import STRATEGIES
from divelab.science.autocog.task import Design, Task, candidate_pool

N_PROBE = 300  # simulated participants per model on the probe battery


@lru_cache(maxsize=8)
def probe_design(task: Task = Task(), n_pairs: int = 16) -> Design:
    """Pairs that separate the known strategies most (greedy on the spread of their predictions)."""
    rng = np.random.default_rng(2024)
    pool = candidate_pool(task, 400, rng)
    preds = np.stack([static_prob_a(s, pool, task, 100, np.random.default_rng(0)) for s in STRATEGIES.values()
                      if s.name not in ("perseveration", "random")])
    chosen: list[int] = []
    for _ in range(n_pairs):  # each step: the pair that best separates the pair of strategies closest so far
        if chosen:
            sub = preds[:, chosen]
            dist = np.linalg.norm(sub[:, None] - sub[None], axis=-1) + np.eye(len(preds)) * 1e9
            i, j = np.unravel_index(np.argmin(dist), dist.shape)
            gain = np.abs(preds[i] - preds[j])
        else:
            gain = preds.std(axis=0)
        gain[chosen] = -1
        chosen.append(int(np.argmax(gain)))
    return Design.from_arrays(task, pool[chosen], n_trials=96, label="probe")


def data_features(d: Data) -> np.ndarray:
    """What recovery compares: the pooled choice rate on every pair, and the repeat rate (weighted 2)."""
    rep = (d.chose_left[:, 1:] == d.chose_left[:, :-1]).mean()
    return np.r_[pair_rates(d), 2.0 * rep]


def features(model: ChoiceModel, task: Task = Task(), seed: int = 0) -> np.ndarray:
    return data_features(simulate(model, probe_design(task), N_PROBE, np.random.default_rng(seed)))


@lru_cache(maxsize=64)
def _strategy_features(name: str, task: Task, seed: int) -> np.ndarray:
    return features(STRATEGIES[name], task, seed)


def distances(model: ChoiceModel, task: Task = Task(), seed: int = 0) -> dict[str, float]:
    f = features(model, task, seed + 1)
    return {n: float(np.linalg.norm(f - _strategy_features(n, task, seed))) for n in STRATEGIES}


def classify(model: ChoiceModel, task: Task = Task(), seed: int = 0) -> str:
    """The name of the known strategy ``model`` behaves most like on the probe battery."""
    d = distances(model, task, seed)
    return min(d, key=d.get)
