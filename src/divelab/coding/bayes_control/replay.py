"""Replay evaluation on labelled pools: critics read from the logged runs, refinement drawn by a
stated transition model, controllers' choices summed into net utility.

The generator (the stand-in for an LLM, parameters stated in :class:`GeneratorModel`):

- a first attempt is correct with probability ``p_first`` (a uniformly drawn correct candidate of
  the pool), else a uniformly drawn wrong one;
- refining a wrong candidate with ``d`` failing hidden tests gives, with probability
  ``p_improve``, a uniform draw from the candidates with fewer failing tests (the correct ones
  included), else a uniform draw from the other wrong candidates with at least ``d`` failures;
- refining a correct candidate keeps it correct with probability ``p_keep``, else breaks it.

Controllers never see these parameters: their prior, critic likelihoods and rho11/rho01 are
estimated from logged trajectories on the training tasks and evaluated on held-out tasks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from divelab.cache import stable_hash
from divelab.codetasks.humaneval import Task
from divelab.coding.bayes_control.belief import BeliefModel, RefineModel, calibrate
from divelab.coding.bayes_control.controllers import (
    AlwaysVerify,
    Controller,
    Costs,
    DPController,
    FixedThreshold,
    GreedyController,
    NeverVerify,
    ShipIfCriticsPass,
    VerifyIfCriticsPass,
)
from divelab.coding.bayes_control.episode import run_episode
from divelab.coding.bayes_control.pool import Candidate, Pool

CRITIC_NAMES = ("syntax", "pyflakes", "docstring-examples", "public-tests")


@dataclass(frozen=True)
class GeneratorModel:
    p_first: float = 0.5
    p_improve: float = 0.6
    p_keep: float = 0.9

    def __post_init__(self) -> None:
        for name in ("p_first", "p_improve", "p_keep"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"GeneratorModel.{name} must be in [0, 1], got {v!r}")

    def first(self, pool: Pool, rng: random.Random) -> int:
        good, bad = pool.correct_ids, pool.wrong_ids
        if good and (not bad or rng.random() < self.p_first):
            return rng.choice(good)
        return rng.choice(bad)

    def refine(self, pool: Pool, cur: int, rng: random.Random) -> int:
        c = pool.candidates[cur]
        good, bad = pool.correct_ids, pool.wrong_ids
        if c.correct:
            if rng.random() < self.p_keep or not bad:
                return rng.choice(good)
            return rng.choice(bad)
        fewer = [x.cid for x in pool.candidates if x.n_failed < c.n_failed]
        if fewer and rng.random() < self.p_improve:
            return rng.choice(fewer)
        same = [x.cid for x in pool.candidates if not x.correct and x.n_failed >= c.n_failed and x.cid != cur]
        return rng.choice(same) if same else cur


def public_indices(task: Task, level: float) -> list[int]:
    """The 'public' tests at informativeness ``level``: a fixed per-task random order of the hidden
    tests, first ``max(1, round(level * n))`` of them; level <= 0 means no public tests."""
    if level <= 0:
        return []
    order = list(range(task.n_tests))
    random.Random(stable_hash(["public", task.task_id], 8)).shuffle(order)
    return sorted(order[: max(1, round(level * task.n_tests))])


def critic_observation(cand: Candidate, k: int, public: list[int]) -> bool | None:
    if k == 0:
        return cand.syntax_ok
    if k == 1:
        return not cand.pyflakes_messages
    if k == 2:
        return cand.evaluation.doc_passed
    if k == 3:
        return cand.evaluation.passed_tests(public) if public else None
    raise ValueError(f"critic index {k} out of range 0..3 ({', '.join(CRITIC_NAMES)})")


def critic_costs(public: list[int] | int, base: Sequence[float] = (0.001, 0.002, 0.01)) -> tuple[float, ...]:
    n = public if isinstance(public, int) else len(public)
    return (*base, 0.005 + 0.005 * n)


def available(task: Task, public: list[int], level: float = 0.0) -> tuple[bool, ...]:
    """Critics that can run: the docstring critic needs >>> examples and is switched off at a
    negative informativeness level ("static critics only")."""
    return (True, True, level >= 0 and task.n_doc_examples > 0, bool(public))


class ReplayEnv:
    """A pool seen through the controller's actions; the candidate changes only on refine."""

    def __init__(self, pool: Pool, level: float, gen: GeneratorModel, rng: random.Random):
        self.pool, self.gen, self.rng = pool, gen, rng
        self.public = public_indices(pool.task, level)
        self.available = available(pool.task, self.public, level)
        self.cur = gen.first(pool, rng)

    def critic(self, k: int) -> tuple[bool | None, str]:
        return critic_observation(self.pool.candidates[self.cur], k, self.public), ""

    def refine(self, feedback: str) -> None:
        self.cur = self.gen.refine(self.pool, self.cur, self.rng)

    def verify(self) -> bool:
        return self.pool.candidates[self.cur].correct

    def shipped_correct(self) -> bool:
        return self.pool.candidates[self.cur].correct


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(int(stable_hash([seed, *map(str, parts)], 12), 16))


def estimate_model(pools: Sequence[Pool], level: float, gen: GeneratorModel, seed: int,
                   trajectories: int = 10, refinements: int = 4, shuffle_labels: bool = False) -> BeliefModel:
    """Fit prior, critic likelihoods and rho11/rho01 on logged trajectories (every critic run on
    every candidate, refined ``refinements`` times) of the given (training) pools.

    ``shuffle_labels`` is the negative control: the critic likelihoods are fitted on the logged candidates'
    correctness labels shuffled among them (seeded), so the critics carry no evidence while the prior and the
    refinement rates stay those of the real logs."""
    firsts: list[bool] = []
    logged: list[tuple[Candidate, list[int]]] = []  # every logged candidate with its task's public tests
    trans = {True: [0, 0], False: [0, 0]}  # parent correct -> [child correct, total]
    for pool in pools:
        public = public_indices(pool.task, level)
        for r in range(trajectories):
            rng = _rng(seed, "log", pool.task.task_id, r)
            cur = gen.first(pool, rng)
            firsts.append(pool.candidates[cur].correct)
            for step in range(refinements + 1):
                cand = pool.candidates[cur]
                logged.append((cand, public))
                if step < refinements:
                    nxt = gen.refine(pool, cur, rng)
                    t = trans[cand.correct]
                    t[0] += pool.candidates[nxt].correct
                    t[1] += 1
                    cur = nxt
    labels = [cand.correct for cand, _ in logged]
    if shuffle_labels:
        _rng(seed, "shuffle-labels").shuffle(labels)
    prior = (sum(firsts) + 1) / (len(firsts) + 2)
    liks = tuple(calibrate((critic_observation(cand, k, public), y) for (cand, public), y in zip(logged, labels,
                                                                                                    strict=True))
                 for k in range(len(CRITIC_NAMES)))
    rho11 = (trans[True][0] + 1) / (trans[True][1] + 2)
    rho01 = (trans[False][0] + 1) / (trans[False][1] + 2)
    return BeliefModel(prior=prior, critics=liks, refine=RefineModel(rho11=rho11, rho01=rho01))


def make_controllers(model: BeliefModel, costs: Costs, max_steps: int) -> list[Controller]:
    return [
        AlwaysVerify(), NeverVerify(), VerifyIfCriticsPass(), ShipIfCriticsPass(), FixedThreshold(0.8),
        GreedyController(model, costs), DPController(model, costs, horizon=max_steps),
    ]


def evaluate_controllers(pools: Sequence[Pool], level: float, model: BeliefModel, costs: Costs,
                         gen: GeneratorModel, seed: int, reps: int = 10, max_steps: int = 8,
                         controllers: Sequence[Controller] | None = None) -> dict[str, np.ndarray]:
    """Mean net utility per task (array over ``pools``) for each controller."""
    controllers = controllers or make_controllers(model, costs, max_steps)
    out: dict[str, np.ndarray] = {}
    for ctl in controllers:
        per_task = np.zeros(len(pools))
        for i, pool in enumerate(pools):
            total = 0.0
            for r in range(reps):
                env = ReplayEnv(pool, level, gen, _rng(seed, "eval", pool.task.task_id, r))
                total += run_episode(ctl, env, model, costs, max_steps=max_steps).utility
            per_task[i] = total / reps
        out[ctl.name] = per_task
    return out


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (ties count half): :func:`divelab.stats.auroc` with scores first."""
    from divelab import stats

    return stats.auroc(np.asarray(labels, dtype=bool).astype(int), scores)


def correctness_scores(pools: Sequence[Pool], level: float, model: BeliefModel,
                       ) -> tuple[list[float], list[int], list[int], list[bool], list[int]]:
    """Per candidate of ``pools``: belief after every available critic, #critics passed, public
    tests passed (0/1), label, and the index of its pool."""
    beliefs, passed, public_pass, labels, owner = [], [], [], [], []
    for i, pool in enumerate(pools):
        public = public_indices(pool.task, level)
        avail = available(pool.task, public, level)
        for cand in pool.candidates:
            b, n = model.prior, 0
            for k, ok in enumerate(avail):
                if not ok:
                    continue
                o = critic_observation(cand, k, public)
                if o is None:
                    continue
                b = model.critics[k].posterior(b, o)
                n += int(o)
            beliefs.append(b)
            passed.append(n)
            public_pass.append(int(bool(public) and cand.evaluation.passed_tests(public)))
            labels.append(cand.correct)
            owner.append(i)
    return beliefs, passed, public_pass, labels, owner


def task_bootstrap_ci(fn: Callable[[np.ndarray], float], n_groups: int, seed: int,
                      n_resamples: int = 1000) -> tuple[float, float]:
    """Percentile 95% interval of ``fn(task indices)`` resampling tasks with replacement
    (:func:`divelab.stats.bootstrap_ci` over the task indices: candidates of one task move together)."""
    from divelab import stats

    return stats.bootstrap_ci(np.arange(n_groups), lambda idx: float(fn(idx.astype(int))), n_resamples=n_resamples,
                              seed=seed, method="percentile")


class SyntheticEnv:
    """Logs drawn from a belief model itself (correctness, critic outcomes, refinements): the world in
    which that model is exactly right, so the DP is optimal in expectation."""

    def __init__(self, model: BeliefModel, rng: random.Random):
        self.model, self.rng = model, rng
        self.available = tuple(True for _ in model.critics)
        self.correct = rng.random() < model.prior

    def critic(self, k: int) -> tuple[bool | None, str]:
        lik = self.model.critics[k]
        return self.rng.random() < (lik.alpha if self.correct else lik.beta), ""

    def refine(self, feedback: str) -> None:
        r = self.model.refine
        self.correct = self.rng.random() < (r.rho11 if self.correct else r.rho01)

    def verify(self) -> bool:
        return self.correct

    def shipped_correct(self) -> bool:
        return self.correct
