"""Experiment design: discriminating designs, checked by simulation at the planned N.

A :class:`Proposal` is a design plus candidate metrics. :func:`simulation_check` simulates both
theories (``n_runs`` synthetic participants each, one parameter draw per participant), computes
each metric per participant, and runs Welch's t-test from those means and SDs *as if* each group
had the planned N (25, the paper's sample size); the proposal is accepted iff some metric gives
two-sided p < alpha (0.01). :func:`optimise` is the programmatic advocate's search: candidate
pairs ranked by model disagreement (AutoRA's experimentalist), a few candidate designs, the one
whose best metric separates the theories most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as st

from divelab.science.autocog.autora_bridge import disagreement_scores
from divelab.science.autocog.metrics import LIBRARY, Metric, prefers
from divelab.science.autocog.simulate import Data
from divelab.science.autocog.task import Design, Task
from divelab.science.autocog.theory import Theory

SimFn = Callable[[Theory, Design], Data]


@dataclass
class MetricCheck:
    name: str
    spec: dict
    mean_x: float
    mean_y: float
    t: float
    p: float


@dataclass
class Proposal:
    design: Design
    metrics: list[Metric]
    advocate: str = ""
    checks: list[MetricCheck] = field(default_factory=list)
    accepted: bool = False

    @property
    def best_p(self) -> float:
        return min((c.p for c in self.checks), default=1.0)

    def to_dict(self) -> dict:
        return {"design": self.design.to_dict(), "advocate": self.advocate, "accepted": self.accepted,
                "checks": [vars(c) for c in self.checks]}


def welch(a: np.ndarray, b: np.ndarray, n_planned: int) -> tuple[float, float]:
    """Welch's t and two-sided p from two simulated samples' means/SDs, at ``n_planned`` per group."""
    sa, sb = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    if sa == 0 and sb == 0:
        same = float(np.mean(a)) == float(np.mean(b))
        return (0.0, 1.0) if same else (float("inf"), 0.0)
    res = st.ttest_ind_from_stats(float(np.mean(a)), sa, n_planned, float(np.mean(b)), sb, n_planned,
                                  equal_var=False)
    return float(res.statistic), float(res.pvalue)


def simulation_check(prop: Proposal, x: Theory, y: Theory, sim: SimFn, *, n_planned: int = 25,
                     alpha: float = 0.01, max_metrics: int = 4) -> Proposal:
    """Fill ``prop.checks`` (metrics with p < alpha, best first, at most ``max_metrics``) and ``accepted``."""
    dx, dy = sim(x, prop.design), sim(y, prop.design)
    checks = []
    for m in prop.metrics:
        a, b = m(dx), m(dy)
        if np.isnan(a).any() or np.isnan(b).any():
            continue
        t, p = welch(a, b, n_planned)
        checks.append(MetricCheck(m.name, m.spec, float(a.mean()), float(b.mean()), t, p))
    checks.sort(key=lambda c: c.p)
    passing = [c for c in checks if c.p < alpha][:max_metrics]
    prop.checks = passing if passing else checks[:1]
    prop.accepted = bool(passing)
    return prop


def adaptive_metrics(x: Theory, y: Theory) -> list[Metric]:
    """The metric library plus metrics built from the two theories (both directions)."""
    return [*LIBRARY.values(), prefers(x, y)]


def candidate_designs(own: Theory, rival: Theory, pool: np.ndarray, task: Task, rng: np.random.Generator,
                      *, n_pairs: int = 8, n_trials: int = 96, label: str = "") -> tuple[list[Design], str]:
    """Up to three designs where ``own`` and ``rival`` disagree, built from AutoRA's disagreement ranking:
    the most disagreeing pairs; the most disagreeing among those where ``own`` is the more confident;
    half top pairs, half random."""
    scores, impl = disagreement_scores(pool, [own, rival], task, seed=int(rng.integers(1 << 30)))
    order = np.argsort(-scores, kind="stable")
    top = pool[order[:n_pairs]]
    from divelab.science.autocog.simulate import static_prob_a

    p_own = static_prob_a(own, pool[order[: 4 * n_pairs]], task, 100, np.random.default_rng(1))
    p_riv = static_prob_a(rival, pool[order[: 4 * n_pairs]], task, 100, np.random.default_rng(1))
    confident = order[: 4 * n_pairs][np.abs(p_own - 0.5) >= np.abs(p_riv - 0.5)][:n_pairs]
    mixed = np.concatenate([order[: n_pairs // 2], rng.choice(len(pool), n_pairs - n_pairs // 2, replace=False)])
    designs = [Design.from_arrays(task, top, n_trials, f"{label}top")]
    if len(confident) >= 2:
        designs.append(Design.from_arrays(task, pool[confident], n_trials, f"{label}own-confident"))
    designs.append(Design.from_arrays(task, pool[np.unique(mixed)], n_trials, f"{label}mixed"))
    return designs, impl


def random_designs(pool: np.ndarray, task: Task, rng: np.random.Generator, *, n_designs: int = 3,
                   n_pairs: int = 8, n_trials: int = 96, label: str = "") -> list[Design]:
    """The blind-design ablation: pairs drawn at random from the pool, ignoring the theories."""
    return [Design.from_arrays(task, pool[rng.choice(len(pool), n_pairs, replace=False)], n_trials,
                               f"{label}random{i}") for i in range(n_designs)]


def optimise(x: Theory, y: Theory, pool: np.ndarray, task: Task, sim: SimFn, rng: np.random.Generator, *,
             n_planned: int = 25, alpha: float = 0.01, n_pairs: int = 8, n_trials: int = 96) -> Proposal:
    """The best checked proposal (accepted or not) for discriminating ``x`` from ``y``."""
    designs, _ = candidate_designs(x, y, pool, task, rng, n_pairs=n_pairs, n_trials=n_trials)
    props = [simulation_check(Proposal(d, adaptive_metrics(x, y)), x, y, sim, n_planned=n_planned, alpha=alpha)
             for d in designs]
    return min(props, key=lambda p: p.best_p)
