"""One training run of every router and baseline on a recorded pool: train on one split, score the other.

Shared by the programmatic pool (fresh queries and worker seeds per run) and the real workers' pool
(one recorded pool, a fresh split per run). With several replicates the routers train on the mean
reward of replicates 1..R-1 and are scored on replicate 0; with one (greedy workers) they train on the
training queries' only outcome and are scored on the held-out queries' (the queries are disjoint).
Matched cost: the budget per query is the router's own mean spend on the training queries, and every
baseline (best affordable worker, kNN and MF with a calibrated cost penalty, a cascade tuned on train)
is held to it there. A two-call cascade rarely fits a one-call budget, so the comparison also runs the
other way: the cascade tuned on train without a budget sets one (its own mean training cost), and the
router, kNN, MF and the best affordable worker are held to that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import stats
from divelab.orchestration.fugu.router import (
    KNNRouter,
    LinearRouter,
    MFRouter,
    best_single,
    calibrate_lambda,
    cascade,
    penalised_argmax,
    tune_cascade,
)


@dataclass
class Split:
    """Every router and baseline trained on ``tr`` and scored on ``te`` of one recorded pool."""

    names: list[str]
    te: np.ndarray
    xtr: np.ndarray
    xte: np.ndarray
    ytr: np.ndarray
    sft: LinearRouter
    fugu: LinearRouter
    nodiv: LinearRouter
    arms: dict[str, tuple[np.ndarray, np.ndarray]]  # arm -> (success, cost) per test query
    train_cost: dict[str, float]  # matched arm -> its mean cost on the training queries
    picks: dict[str, str]  # which worker or configuration a baseline chose on train (it varies by run)
    budget: float
    lam: dict[str, float]
    table: dict[str, Any]
    # the other direction: the budget is the tuned cascade's own mean training cost (None: no cascade could be
    # tuned), the arms held to it are the ``CASCADE_MATCHED`` ones and ``fugu @ cascade budget``
    cascade_budget: float | None = None
    cascade_train_cost: dict[str, float] | None = None  # arm -> its mean cost on the training queries
    cascade_lam: dict[str, float] | None = None


# the baselines of the comparison at the cascade's own budget (arm names in Split.arms)
CASCADE_MATCHED = ("cascade (tuned on train)", "best affordable single @ cascade budget", "kNN @ cascade budget",
                   "MF @ cascade budget")


def train_and_score(names: list[str], x: np.ndarray, reward: np.ndarray, cost: np.ndarray, answers: np.ndarray,
                    tr: np.ndarray, te: np.ndarray, rng: np.random.Generator, seed: int, *, tau: float,
                    cma_iters: int, popsize: int, w_div: float, price: np.ndarray | None = None) -> Split:
    """``reward``/``cost``/``answers``: (N, L, R) recorded outcomes; ``x``: (N, d) features; ``price``: each
    worker's price (the cost penalty's scale and the cascade's cheap pair; default: its mean training cost)."""
    n_workers = len(names)
    reps = reward.shape[2]
    train_reps = slice(1, None) if reps > 1 else slice(0, 1)
    rbar = reward[:, :, train_reps].mean(axis=2)              # training signal
    y, c, ans = reward[:, :, 0], cost[:, :, 0], answers[:, :, 0]   # evaluation: replicate 0
    if price is None:
        price = c[tr].mean(axis=0)
    cnorm = price / price.max()
    cost_row = c[te].mean(axis=0)
    xtr, xte, ytr, yte = x[tr], x[te], rbar[tr], y[te]

    def on_test(choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.arange(len(te))
        return yte[idx, choice], c[te][idx, choice]

    def train_cost(choice: np.ndarray) -> float:
        return float(c[tr][np.arange(len(tr)), choice].mean())

    sft = LinearRouter(names, x.shape[1]).fit_sft(xtr, ytr, tau=tau)
    fugu = LinearRouter(names, x.shape[1], w=sft.w.copy()).fit_cma(
        xtr, ytr, w_div=w_div, iters=cma_iters, popsize=popsize, seed=seed)
    nodiv = LinearRouter(names, x.shape[1], w=sft.w.copy()).fit_cma(
        xtr, ytr, w_div=0.0, iters=cma_iters, popsize=popsize, seed=seed)
    # negative control: the same router trained on shuffled labels (each training query gets another's rewards)
    shuf_y = ytr[np.random.default_rng(seed + 7).permutation(len(tr))]
    shuf = LinearRouter(names, x.shape[1]).fit_sft(xtr, shuf_y, tau=tau)
    shuf.fit_cma(xtr, shuf_y, w_div=w_div, iters=cma_iters, popsize=popsize, seed=seed)
    # sham second stage: the SFT weights moved as far as sep-CMA-ES moved them, in a random direction
    step = fugu.w - sft.w
    rand = np.random.default_rng(seed + 11).standard_normal(step.shape)
    sham = sft.w + rand * (np.linalg.norm(step) / max(np.linalg.norm(rand), 1e-12))
    knn = KNNRouter(10).fit(xtr, ytr)
    mf = MFRouter(8, seed=seed).fit(xtr, ytr)
    b = best_single(ytr)
    arms: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "fugu (SFT+CMA)": on_test(fugu.route(xte)),
        "SFT only": on_test(sft.route(xte)),
        "kNN router": on_test(knn.route(xte)),
        "MF router (RouteLLM-style)": on_test(mf.route(xte)),
        "best single": on_test(np.full(len(te), b)),
        "random": on_test(rng.integers(0, n_workers, len(te))),
        "first worker": on_test(np.zeros(len(te), dtype=int)),
        "cheapest worker": on_test(np.full(len(te), int(np.argmin(price)))),
        "majority vote (all workers)": majority_vote(ans[te], yte, c[te]),
        "fugu, shuffled labels": on_test(shuf.route(xte)),
        "SFT + random step (CMA's size)": on_test(LinearRouter(names, x.shape[1], w=sham).route(xte)),
        "oracle": (yte.max(axis=1), c[te][np.arange(len(te)), yte.argmax(axis=1)]),
    }
    cheap = tuple(int(i) for i in np.argsort(price)[:2])
    arms["cascade (2 cheap agree, else best)"] = cascade(ans[te], yte, c[te], cheap, b)  # type: ignore[arg-type]
    c_train = c[tr].mean(axis=0)
    # each router's routing scores, computed once: a cost penalty λ only shifts them (route(x, cnorm, λ) is
    # argmax(score − λ·cnorm)), so calibrating λ by bisection needs no fresh prediction per step
    scores = {k: (r.route_scores(xtr), r.route_scores(xte)) for k, r in (("fugu", fugu), ("kNN", knn), ("MF", mf))}
    ctl_scores = (shuf.route_scores(xtr), shuf.route_scores(xte))

    def held_to(limit: float, suffix: str) -> tuple[dict[str, float], int, dict[str, float]]:
        """λ for each router and the best affordable worker, held to ``limit`` on the training queries; their
        test arms go into ``arms`` under ``<name> @ <suffix>``; returns (λ, the affordable worker, train costs)."""
        la = {k: calibrate_lambda(lambda v, s=s_tr: penalised_argmax(s, cnorm, v), c[tr], limit) for k, (s_tr, _) in scores.items()}
        fits = [i for i in range(n_workers) if c_train[i] <= limit * (1 + 1e-9)]
        aff = max(fits, key=lambda i: ytr[:, i].mean()) if fits else int(np.argmin(c_train))
        for k, (_, s_te) in scores.items():
            arms[f"{k} @ {suffix}"] = on_test(penalised_argmax(s_te, cnorm, la[k]))
        spent = {f"{k} @ {suffix}": train_cost(penalised_argmax(s_tr, cnorm, la[k])) for k, (s_tr, _) in scores.items()}
        # the shuffled-label control held to the same limit (not a baseline: its spend is not checked)
        lc = calibrate_lambda(lambda v: penalised_argmax(ctl_scores[0], cnorm, v), c[tr], limit)
        arms[f"fugu, shuffled labels @ {suffix}"] = on_test(penalised_argmax(ctl_scores[1], cnorm, lc))
        return la, aff, spent

    # matched cost: the budget is the router's own mean spend on the training queries; every baseline is
    # held to it on the training queries (a cost penalty λ calibrated by bisection, the best worker that
    # fits, the best cascade configuration that fits) and scored on the held-out queries
    budget = train_cost(fugu.route(xtr))
    lam, b_aff, tcost = held_to(budget, "budget")
    # the cascade is tuned on one recorded replicate of the training queries (answers are needed, not mean
    # rewards): replicate 1 when there are several, the only one otherwise
    rt = 1 if reps > 1 else 0
    a_tr, r_tr, c_tr = answers[tr][:, :, rt], reward[tr][:, :, rt], cost[tr][:, :, rt]
    casc = tune_cascade(a_tr, r_tr, c_tr, budget)
    (ca, cb), ct = casc if casc is not None else (cheap, int(np.argmin(price)))
    picks = {"best single": names[b], "best affordable single": names[b_aff],
             "cascade @ budget": f"{names[ca]} + {names[cb]} agree, else {names[ct]}"
                                 + ("" if casc is not None else " (no configuration fits the budget)")}
    arms["best affordable single"] = on_test(np.full(len(te), b_aff))
    arms["cascade @ budget"] = cascade(ans[te], yte, c[te], (ca, cb), ct)
    tcost.update({"best affordable single": float(c_train[b_aff]),
                  "cascade @ budget": float(cascade(a_tr, r_tr, c_tr, (ca, cb), ct)[1].mean())})
    # the other direction: the cascade tuned on train with no budget (its best configuration there) sets the
    # budget, its own mean training cost, and the router and the one-call baselines are held to that
    free = tune_cascade(a_tr, r_tr, c_tr, math.inf)
    c_budget = c_lam = c_tcost = None
    if free is not None:
        (fa, fb), ft = free
        c_budget = float(cascade(a_tr, r_tr, c_tr, (fa, fb), ft)[1].mean())
        c_lam, c_aff, c_tcost = held_to(c_budget, "cascade budget")
        arms["best affordable single @ cascade budget"] = on_test(np.full(len(te), c_aff))
        arms["cascade (tuned on train)"] = cascade(ans[te], yte, c[te], (fa, fb), ft)
        c_tcost.update({"best affordable single @ cascade budget": float(c_train[c_aff]),
                        "cascade (tuned on train)": c_budget})
        picks.update({"best affordable single @ cascade budget": names[c_aff],
                      "cascade (tuned on train)": f"{names[fa]} + {names[fb]} agree, else {names[ft]}"})
    arms["no diversity bonus"] = on_test(nodiv.route(xte))

    table = {k: {"success": float(r.mean()), "success_ci": list(stats.proportion_ci(int(r.sum()), r.size)),
                 "cost": float(cc.mean())} for k, (r, cc) in arms.items() if k != "no diversity bonus"}
    table["per-worker success (test, replicate 0)"] = dict(zip(names, yte.mean(axis=0).round(3).tolist(),
                                                              strict=True))
    table["per-worker cost"] = dict(zip(names, cost_row.round(4).tolist(), strict=True))
    return Split(names, te, xtr, xte, ytr, sft, fugu, nodiv, arms, tcost, picks, budget, lam, table, c_budget, c_tcost,
                 c_lam)


def majority_vote(answers: np.ndarray, rewards: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every worker answers; the most common answer wins (ties: the earliest worker's). Per-query (reward, cost)."""
    reward = np.zeros(len(answers))
    for q, row in enumerate(answers):
        vals, first, counts = np.unique(row, return_index=True, return_counts=True)
        top = counts.max()
        pick = int(min(first[counts == top]))
        reward[q] = rewards[q, pick]
    return reward, cost.sum(axis=1).astype(float)


def held_to_cascade(splits: list[Split]) -> tuple[list[str], list[str], str | None]:
    """The comparison at the cascade's own budget over these splits: the baselines held to it on the training
    queries of every split, those that spent over it there (named, not compared), and why the comparison
    cannot speak (None when it can): no cascade could be tuned, or the router could not be held to its budget."""
    if any(s.cascade_budget is None or s.cascade_train_cost is None for s in splits):
        return [], [], ("the cascade could not be tuned on the training queries (no configuration has a finite mean "
                        "cost) in some split, so there is no cascade budget to hold the router to")
    over = sorted({a for s in splits for a, v in s.cascade_train_cost.items()  # type: ignore[union-attr]
                   if v > s.cascade_budget * (1 + 1e-6)})  # type: ignore[operator]
    if "fugu @ cascade budget" in over:
        return [], over, "the router could not be held to the cascade's budget on the training queries in some split"
    return [a for a in CASCADE_MATCHED if a not in over], over, None
