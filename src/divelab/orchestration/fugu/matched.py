"""One training run of every router and baseline on a recorded pool: train on one split, score the other.

Shared by the programmatic pool (fresh queries and worker seeds per run) and the real workers' pool
(one recorded pool, a fresh split per run). With several replicates the routers train on the mean
reward of replicates 1..R-1 and are scored on replicate 0; with one (greedy workers) they train on the
training queries' only outcome and are scored on the held-out queries' (the queries are disjoint).
Matched cost: the budget per query is the router's own mean spend on the training queries, and every
baseline (best affordable worker, kNN and MF with a calibrated cost penalty, a cascade tuned on train)
is held to it there.
"""

from __future__ import annotations

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
        "oracle": (yte.max(axis=1), c[te][np.arange(len(te)), yte.argmax(axis=1)]),
    }
    cheap = tuple(int(i) for i in np.argsort(price)[:2])
    arms["cascade (2 cheap agree, else best)"] = cascade(ans[te], yte, c[te], cheap, b)  # type: ignore[arg-type]
    # matched cost: the budget is the router's own mean spend on the training queries; every baseline is
    # held to it on the training queries (a cost penalty λ calibrated by bisection, the best worker that
    # fits, the best cascade configuration that fits) and scored on the held-out queries
    c_train = c[tr].mean(axis=0)
    budget = train_cost(fugu.route(xtr))
    lam = {"fugu": calibrate_lambda(lambda la: fugu.route(xtr, cnorm, la), c[tr], budget),
           "kNN": calibrate_lambda(lambda la: knn.route(xtr, cnorm, la), c[tr], budget),
           "MF": calibrate_lambda(lambda la: mf.route(xtr, cnorm, la), c[tr], budget)}
    affordable = [i for i in range(n_workers) if c_train[i] <= budget * (1 + 1e-9)]
    b_aff = max(affordable, key=lambda i: ytr[:, i].mean()) if affordable else int(np.argmin(c_train))
    # the cascade is tuned on one recorded replicate of the training queries (answers are needed, not mean
    # rewards): replicate 1 when there are several, the only one otherwise
    rt = 1 if reps > 1 else 0
    casc = tune_cascade(answers[tr][:, :, rt], reward[tr][:, :, rt], cost[tr][:, :, rt], budget)
    (ca, cb), ct = casc if casc is not None else (cheap, int(np.argmin(price)))
    picks = {"best single": names[b], "best affordable single": names[b_aff],
             "cascade @ budget": f"{names[ca]} + {names[cb]} agree, else {names[ct]}"
                                 + ("" if casc is not None else " (no configuration fits the budget)")}
    arms["fugu @ budget"] = on_test(fugu.route(xte, cnorm, lam["fugu"]))
    arms["kNN @ budget"] = on_test(knn.route(xte, cnorm, lam["kNN"]))
    arms["MF @ budget"] = on_test(mf.route(xte, cnorm, lam["MF"]))
    arms["best affordable single"] = on_test(np.full(len(te), b_aff))
    arms["cascade @ budget"] = cascade(ans[te], yte, c[te], (ca, cb), ct)
    casc_train = float(cascade(answers[tr][:, :, rt], reward[tr][:, :, rt], cost[tr][:, :, rt], (ca, cb), ct)[1].mean())
    tcost = {"fugu @ budget": train_cost(fugu.route(xtr, cnorm, lam["fugu"])),
             "kNN @ budget": train_cost(knn.route(xtr, cnorm, lam["kNN"])),
             "MF @ budget": train_cost(mf.route(xtr, cnorm, lam["MF"])),
             "best affordable single": float(c_train[b_aff]), "cascade @ budget": casc_train}
    arms["no diversity bonus"] = on_test(nodiv.route(xte))

    table = {k: {"success": float(r.mean()), "success_ci": list(stats.proportion_ci(int(r.sum()), r.size)),
                 "cost": float(cc.mean())} for k, (r, cc) in arms.items() if k != "no diversity bonus"}
    table["per-worker success (test, replicate 0)"] = dict(zip(names, yte.mean(axis=0).round(3).tolist(),
                                                              strict=True))
    table["per-worker cost"] = dict(zip(names, cost_row.round(4).tolist(), strict=True))
    return Split(names, te, xtr, xte, ytr, sft, fugu, nodiv, arms, tcost, picks, budget, lam, table)
