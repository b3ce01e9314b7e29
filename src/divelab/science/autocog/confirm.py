"""The confirmatory study: freeze a theory's predictions, draw a fresh cohort, preregistered one-sided tests.

The design pits the frozen theory (e.g. DR-WADD, found by the loop) against linear WADD:

- *conflict* pairs: one large rating on one cue against moderate ratings spread over others, where
  linear WADD prefers the concentrated option and the frozen theory the spread one; split into a
  *strong* and a *weak* half by the frozen theory's predicted preference;
- *control* pairs: the same ratings on mirrored cues (the better rating on the more valid cue).

Preregistered hypotheses (one-sided, alpha 0.05 each, stated before the cohort is drawn):

- H1: participants choose the spread option on conflict trials more often than linear WADD predicts;
- H2: more often on strong than on weak conflict trials (the graded, diminishing-sensitivity form);
- H3: on control trials they choose the option with the better rating on the more valid cue more
  than half the time (validities are still used).

:func:`power` repeats the fresh-cohort step many times: how thin is one confirmation at N = 25?
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as st

from divelab.cache import atomic_write_text
from divelab.science.autocog.simulate import ChoiceModel, Data, simulate, static_prob_a
from divelab.science.autocog.task import Design, Task, candidate_pool
from divelab.science.autocog.theory import Theory, wadd_theory

HYPOTHESES = {
    "H1": "spread-option rate on conflict trials > linear WADD's predicted rate",
    "H2": "spread-option rate on strong conflict trials > on weak conflict trials",
    "H3": "better-on-more-valid-cue rate on control trials > 0.5",
}


@dataclass
class ConfirmatoryPlan:
    design: Design
    conflict: list[int]  # pair indices
    strong: list[int]
    weak: list[int]
    control: list[int]
    frozen: dict[str, float]  # the frozen theory's predicted rates, and WADD's


@dataclass
class ConfirmatoryResult:
    n: int
    pvalues: dict[str, float]
    observed: dict[str, float]
    frozen: dict[str, float]
    power: dict[str, float] = field(default_factory=dict)
    power_n_cohorts: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def plan(theory: Theory, task: Task = Task(), *, n_conflict: int = 8, n_control: int = 4, n_trials: int = 96,
         seed: int = 0) -> ConfirmatoryPlan:
    """Build the design and freeze the predictions of ``theory`` and of linear WADD."""
    rng = np.random.default_rng(seed)
    pool = candidate_pool(task, 300, rng)
    wadd = wadd_theory()
    pt = static_prob_a(theory, pool, task, 200, np.random.default_rng(1))
    pw = static_prob_a(wadd, pool, task, 200, np.random.default_rng(1))
    conc = pool[:, 0].max(axis=1) > pool[:, 1].max(axis=1)  # A holds the single large rating
    conflict_idx = np.flatnonzero(conc & (pw > 0.5) & (pt < 0.5))
    if conflict_idx.size < n_conflict:
        raise ValueError(f"{theory.name} and linear WADD disagree on only {conflict_idx.size} candidate pairs "
                         f"(need {n_conflict}); nothing to confirm")
    conflict_idx = conflict_idx[np.argsort(pt[conflict_idx], kind="stable")]  # strongest spread preference first
    pick = conflict_idx[np.linspace(0, conflict_idx.size - 1, n_conflict).round().astype(int)]
    F, R = task.n_features, task.rating_max
    order = np.argsort(-task.v, kind="stable")
    controls = []
    for k in range(n_control):  # better rating on the more valid cue, same multiset of ratings
        hi, lo = R - k, max(0, R // 2 - 2 - k)
        a, b = np.full(F, R // 2), np.full(F, R // 2)
        i, j = order[k % (F - 1)], order[k % (F - 1) + 1]
        a[i], a[j], b[i], b[j] = hi, lo, lo, hi
        controls.append((a, b))
    pairs = np.concatenate([pool[pick], np.asarray(controls)])
    design = Design.from_arrays(task, pairs, n_trials, label="confirmatory")
    nc = len(pick)
    conflict = list(range(nc))
    strong, weak = conflict[: nc // 2], conflict[nc // 2:]
    control = list(range(nc, nc + n_control))
    ptd = static_prob_a(theory, pairs, task, 500, np.random.default_rng(2))
    pwd = static_prob_a(wadd, pairs, task, 500, np.random.default_rng(2))
    frozen = {"theory_spread_rate": float(1 - ptd[conflict].mean()), "wadd_spread_rate": float(1 - pwd[conflict].mean()),
              "theory_strong_minus_weak": float(ptd[weak].mean() - ptd[strong].mean()),
              "theory_control_rate": float(ptd[control].mean())}
    return ConfirmatoryPlan(design, conflict, strong, weak, control, frozen)


def _rates(data: Data, idx: list[int], choose_a: bool) -> np.ndarray:
    mask = np.isin(data.trials.pair, idx)
    hit = data.chose_a if choose_a else ~data.chose_a
    return np.where(mask, hit, 0).sum(axis=1) / mask.sum(axis=1)


def preregistered_tests(p: ConfirmatoryPlan, data: Data) -> tuple[dict[str, float], dict[str, float]]:
    """The three preregistered one-sided tests on one cohort: (p-values, observed means)."""
    spread = _rates(data, p.conflict, choose_a=False)
    strong, weak = _rates(data, p.strong, False), _rates(data, p.weak, False)
    control = _rates(data, p.control, True)

    def one(res: object) -> float:
        pv = float(res.pvalue)  # type: ignore[attr-defined]
        return 1.0 if np.isnan(pv) else pv

    pv = {"H1": one(st.ttest_1samp(spread, p.frozen["wadd_spread_rate"], alternative="greater")),
          "H2": one(st.ttest_rel(strong, weak, alternative="greater")),
          "H3": one(st.ttest_1samp(control, 0.5, alternative="greater"))}
    obs = {"spread_rate": float(spread.mean()), "strong_minus_weak": float((strong - weak).mean()),
           "control_rate": float(control.mean())}
    return pv, obs


def power(p: ConfirmatoryPlan, participants: ChoiceModel, n: int = 25, n_cohorts: int = 200, *,
          alpha: float = 0.05, seed: int = 0) -> dict[str, float]:
    """Fraction of fresh cohorts of size ``n`` in which each test (and all three) reaches p < alpha."""
    hits = {h: 0 for h in (*HYPOTHESES, "all")}
    for c in range(n_cohorts):
        data = simulate(participants, p.design, n, np.random.default_rng([seed, 7919, c]))
        pv, _ = preregistered_tests(p, data)
        for h in HYPOTHESES:
            hits[h] += pv[h] < alpha
        hits["all"] += all(pv[h] < alpha for h in HYPOTHESES)
    return {h: k / n_cohorts for h, k in hits.items()}


def confirmatory_study(theory: Theory, participants: ChoiceModel, task: Task = Task(), *, n: int = 25,
                       seed: int = 0, n_power: int = 200, trace_dir: str | Path | None = None) -> ConfirmatoryResult:
    """Freeze ``theory``'s predictions (written to ``trace_dir/confirmatory_plan.json`` before any data),
    draw one fresh cohort of ``n`` participants, test H1–H3; then estimate the tests' power at ``n``."""
    p = plan(theory, task, seed=seed)
    if trace_dir is not None:
        atomic_write_text(Path(trace_dir) / "confirmatory_plan.json", json.dumps(
            {"theory": theory.to_dict(), "hypotheses": HYPOTHESES, "frozen": p.frozen, "alpha": 0.05,
             "design": p.design.to_dict(), "n": n}, indent=1))
    cohort = simulate(participants, p.design, n, np.random.default_rng([seed, 104729]))
    pv, obs = preregistered_tests(p, cohort)
    pw = power(p, participants, n, n_power, seed=seed) if n_power else {}
    return ConfirmatoryResult(n, pv, obs, p.frozen, pw, n_power)
