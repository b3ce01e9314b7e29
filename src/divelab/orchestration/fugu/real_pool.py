"""E166 with real workers: the router against every baseline on a recorded pool of SmolLM2-135M-Instruct
LoRA specialists, the untuned model and a tiny LM (:mod:`divelab.orchestration.fugu.real_workers`).

The pool is recorded once (greedy, so one outcome per query and worker); each training run draws a
fresh train/test split of it and retrains every router and baseline
(:func:`divelab.orchestration.fugu.matched.train_and_score`). The runs share the pool's queries, so a
comparison's interval resamples queries (a cluster bootstrap over query ids, each query's results in
every run that tested it), not runs. Headroom is measured, not set: when no worker beats another on
any family the router claims are uninformative.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.chat import user
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest
from divelab.orchestration.fugu.features import HashingFeatures
from divelab.orchestration.fugu.matched import Split, held_to_cascade, train_and_score
from divelab.orchestration.fugu.real_workers import MODEL_LABEL, PoolConfig, RealPool
from divelab.orchestration.fugu.tasks import FAMILIES

SOURCE = "arXiv 2606.21228; week-in-review E166"
MATCHED = ("best affordable single", "kNN @ budget", "MF @ budget", "cascade @ budget")
# the paper's headline gap (Fugu-Ultra 73.7 vs Opus 4.8 69.2): not a size to match, the effect the pool is sized for
PAPER_EFFECT = 0.737 - 0.692


def power_note(per_query: np.ndarray) -> str:
    """The detectable effect of a design whose units are these per-query mean differences, and the queries the
    paper's gap needs at that spread (80% power, alpha 0.05): how the pool is sized."""
    from statsmodels.stats.power import TTestPower

    sd, n = float(np.std(per_query, ddof=1)), int(len(per_query))
    if sd <= 0:
        return f"Power: no spread in the per-query difference over {n} queries."
    need = int(np.ceil(TTestPower().solve_power(effect_size=PAPER_EFFECT / sd, alpha=0.05, power=0.8)))
    return (f"Power (stats.mde_two_sample): sd of the per-query difference {sd:.3f} over {n} queries detects "
            f"{stats.mde_two_sample(sd, n):.4f}; the paper's gap of {PAPER_EFFECT:.3f} needs ~{need} queries "
            f"({'enough' if n >= need else 'too few'} here).")


def workers_label(pool: RealPool) -> str:
    adapters = pool.info.get("adapters", {})
    tuned = [f"{n} ({'+'.join(a['families'])})" for n, a in adapters.items() if a["base"] != "smoke"]
    return (f"{MODEL_LABEL} workers: LoRA adapters {', '.join(tuned)}, the untuned model and a tiny zoo LM "
            "tuned on every family")


def headroom(pool: RealPool, confidence: float = 0.95) -> list[dict[str, Any]]:
    """Every (family, better, worse) where one worker beats another on the family's queries, the paired
    interval of the accuracy gap excluding 0: what a router could exploit. Empty: no headroom."""
    fam = np.array([t.family for t in pool.tasks])
    out = []
    for f in FAMILIES:
        rows = fam == f
        if rows.sum() < 2:
            continue
        r = pool.reward[rows]
        for i in range(len(pool.names)):
            for j in range(len(pool.names)):
                if i == j or r[:, i].mean() <= r[:, j].mean():
                    continue
                d, lo, hi = stats.paired_diff_ci(r[:, i], r[:, j], confidence=confidence)
                if lo > 0:
                    out.append({"family": f, "better": pool.names[i], "worse": pool.names[j], "diff": d,
                                "ci": [lo, hi]})
    return out


def run_splits(pool: RealPool, train_runs: int, seed: int, *, n_features: int = 256, tau: float = 0.1,
               cma_iters: int = 120, popsize: int = 33, w_div: float = 0.15) -> list[Split]:
    """``train_runs`` fresh 50/50 splits of the recorded pool; every router and baseline retrained in each."""
    if train_runs < 2:
        raise ValueError(f"train_runs must be >= 2 (a comparison needs replicated training), got {train_runs}")
    n = len(pool.tasks)
    x = HashingFeatures(n_features)([[user(t.prompt)] for t in pool.tasks])
    out = []
    for k in range(train_runs):
        s = seed * 1000 + k
        rng = np.random.default_rng(s)
        perm = rng.permutation(n)
        tr, te = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
        out.append(train_and_score(pool.names, x, pool.reward[:, :, None], pool.cost[:, :, None],
                                   pool.answers[:, :, None], tr, te, rng, s, tau=tau, cma_iters=cma_iters,
                                   popsize=popsize, w_div=w_div))
    return out


def _stack(splits: Sequence[Split], arm: str, part: int = 0) -> np.ndarray:
    return np.concatenate([s.arms[arm][part] for s in splits])


def _per_query(diff: np.ndarray, qids: np.ndarray) -> np.ndarray:
    """Each query's mean difference over the splits that tested it (the independent units)."""
    return np.array([float(diff[qids == q].mean()) for q in np.unique(qids)])


def _competence_note(pool: RealPool) -> str:
    fam = np.array([t.family for t in pool.tasks])
    parts = []
    for i, n in enumerate(pool.names):
        accs = []
        for f in FAMILIES:
            r = pool.reward[fam == f, i]
            lo, hi = stats.proportion_ci(int(r.sum()), r.size)
            accs.append(f"{f} {r.mean():.2f} [{lo:.2f}, {hi:.2f}]")
        p = pool.prices[n]
        parts.append(f"{n}: " + ", ".join(accs) + f"; price {p['price_in']:.3g}/{p['price_out']:.3g} s per 1k "
                     f"prompt/generated tokens, {pool.cost[:, i].mean():.3g} s per query")
    return "Per worker, held-out accuracy by family (Wilson 95%) and measured price: " + " | ".join(parts) + "."


def _held_baselines(splits: Sequence[Split], matched: list[str], over: list[str]) -> str:
    """Each baseline held to a budget, with its held-out success and test cost; those that overspent, named."""
    return "; ".join(f"{a}: {_stack(splits, a).mean():.3f} at test cost {_stack(splits, a, 1).mean():.4f} s"
                     for a in matched) + (f"; not held to the budget, so not compared: {', '.join(over)}"
                                          if over else "")


def _constant_note(pool: RealPool) -> str:
    """A trivial worker's accuracy per family: always the family's most common answer (what a worker that learned
    only the format and one value scores; 'count' answers are mostly small numbers)."""
    parts = []
    for f in FAMILIES:
        ans = [t.answer for t in pool.tasks if t.family == f]
        if ans:
            top = max(set(ans), key=ans.count)
            parts.append(f"{f} {ans.count(top) / len(ans):.2f} ('{top}')")
    return "A constant answer per family (the most common one) scores: " + ", ".join(parts) + "."


def no_room_or_floor(room: list[dict[str, Any]], floor: float) -> str | None:
    """Why a router comparison on this pool cannot speak (None when it can): no worker beats another on any
    family, or no worker answers any query."""
    if not room:
        return ("no headroom: no worker beats another on any family (paired 95% intervals of every per-family "
                "accuracy gap include 0)")
    return "floor: no worker answers any query correctly" if floor == 0 else None


CASCADE_STATEMENT = ("router (SFT + sep-CMA-ES) on {label} held to the cascade's own budget vs the strongest "
                     "baseline at that budget (the cascade tuned on the training queries, whose mean training cost "
                     "is the budget; the best affordable single worker, kNN and MF held to it), held-out success")


def _family_rep(splits: Sequence[Split], fams: np.ndarray) -> dict[str, Any]:
    return {"unit": "train/test splits (training runs) of the recorded queries", "n": len(splits),
            "clustered_by": f"task family ({len(set(fams.tolist()))} families)"}


def _control(splits: Sequence[Split], arm: str, strongest: str, fams: np.ndarray, seed: int) -> dict[str, Any]:
    d, lo, hi = stats.cluster_diff_ci(_stack(splits, arm), _stack(splits, strongest), fams, seed=seed)
    return verdicts.control(f"router trained on shuffled query→reward labels, minus {strongest}", d, (lo, hi))


FALSIFY = ("held-out success of the router no higher than the strongest baseline's would refute it: the workers' "
           "answers come from the models, and which router reads them better is not set by our constants")


def _claim_cascade_budget(splits: list[Split], label: str, qids: np.ndarray, seed: int, why_not: str | None,
                          comp_note: str, fams: np.ndarray) -> Claim:
    """The matched comparison the other way round: two calls never fit the router's one-call budget, so the
    cascade tuned on train sets the budget (its own mean measured training cost) and the router, kNN, MF and
    the best affordable worker are held to it there; cluster bootstrap over queries."""
    statement = CASCADE_STATEMENT.format(label=label)
    paper = "(no paper number: the paper compares no cascade)"
    matched, over, cannot = held_to_cascade(splits)
    if cannot:
        return Claim(statement=statement, paper_value=paper, measured=None, kind=Kind.EMPIRICAL, source=SOURCE,
                     ruling=verdicts.uninformative(cannot), note=comp_note)
    fr, fc = _stack(splits, "fugu @ cascade budget"), _stack(splits, "fugu @ cascade budget", 1)
    cmp = against_strongest(fr, {a: _stack(splits, a) for a in matched}, clusters=fams, seed=seed)
    dc, loc, hic = stats.cluster_diff_ci(fr, _stack(splits, "cascade (tuned on train)"), fams, seed=seed)
    rule = verdicts.uninformative(why_not) if why_not else verdicts.direction(
        cmp.effect, cmp.ci, expected_sign=1, training_runs=len(splits), why="the paper compares no cascade",
        control=_control(splits, "fugu, shuffled labels @ cascade budget", cmp.strongest, fams, seed))
    picks = {a: sorted({s.picks[a] for s in splits}) for a in ("cascade (tuned on train)",
                                                               "best affordable single @ cascade budget")}
    lam0 = float(np.mean([(s.cascade_lam or {}).get("fugu", 0.0) == 0 for s in splits]))
    return Claim(
        statement=statement, paper_value=paper, measured=cmp.effect, ci=cmp.ci, unit="success", kind=Kind.EMPIRICAL,
        source=SOURCE, **cmp.claim_fields(),
        baseline=_held_baselines(splits, matched, over),
        ruling=rule, falsifier=FALSIFY, replication=_family_rep(splits, fams),
        note=f"against {cmp.strongest}; router minus the cascade {dc:+.4f} [{loc:+.4f}, {hic:+.4f}]. "
             f"{len(splits)} train/test splits of the recorded pool, every router and baseline retrained per "
             f"split; cluster bootstrap over task families. Budget = the tuned cascade's own mean measured cost on the "
             f"training queries ({np.mean([s.cascade_budget for s in splits]):.4f} s/query averaged over splits); "
             f"the router's cost penalty λ is calibrated there (λ = 0 already fits in {lam0:.0%} of splits), as "
             f"are kNN's and MF's; cascade picks: {'; '.join(picks['cascade (tuned on train)'])}; best affordable "
             f"worker: {', '.join(picks['best affordable single @ cascade budget'])}. Router {fr.mean():.3f} at "
             f"{fc.mean():.4f} s/query. " + power_note(_per_query(fr - _stack(splits, cmp.strongest), qids))
             + " " + comp_note)


def claims(pool: RealPool, splits: list[Split], seed: int) -> tuple[list[Claim], dict[str, Any]]:
    """Task competence (family-wise best worker vs the best single worker) and the router against the
    strongest baseline at matched cost, both on held-out queries, intervals clustered by query."""
    label = workers_label(pool)
    qids = np.concatenate([s.te for s in splits])
    fams = np.array([pool.tasks[q].family for q in qids])
    n_q, k = len(pool.tasks), len(splits)
    room = headroom(pool)
    acc = pool.accuracy()
    comp_note = _competence_note(pool)
    fam = np.array([t.family for t in pool.tasks])
    # family-wise best (chosen on each run's training half) vs the best single worker (chosen there too)
    fw, bs = [], []
    for s in splits:
        tr = np.setdiff1d(np.arange(n_q), s.te)
        b = int(pool.reward[tr].mean(axis=0).argmax())
        best = {f: int(pool.reward[tr][fam[tr] == f].mean(axis=0).argmax()) if (fam[tr] == f).any() else b
                for f in FAMILIES}
        fw.append(pool.reward[s.te, [best[f] for f in fam[s.te]]])
        bs.append(pool.reward[s.te, b])
    fwa, bsa = np.concatenate(fw), np.concatenate(bs)
    d0, lo0, hi0 = stats.cluster_diff_ci(fwa, bsa, fams, seed=seed)
    floor = float(pool.reward.max(axis=1).mean())
    if floor == 0:
        rule0 = verdicts.uninformative("floor: no worker answers any query correctly")
    else:
        rule0 = verdicts.direction(d0, (lo0, hi0), expected_sign=1, training_runs=k,
                                   why="the paper's workers are frontier models; no per-family numbers")
    per_q = _per_query(fwa - bsa, qids)
    out = [Claim(
        statement=f"task competence on {label}: the family-wise best worker vs the best single worker (both "
                  "chosen on each run's training half), held-out success",
        paper_value="orchestration pays when different workers are best at different things (no number)",
        measured=d0, ci=(lo0, hi0), unit="success", kind=Kind.PLANTED, source=SOURCE,
        baseline=f"best single worker {bsa.mean():.3f}; family-wise best {fwa.mean():.3f}",
        ruling=rule0, mde=stats.mde_two_sample(float(np.std(per_q, ddof=1)), len(per_q)),
        replication=_family_rep(splits, fams),
        note="Planted: each LoRA adapter is trained on one family (or a pair), so specialists beating one worker is "
             f"written by our training data. {_constant_note(pool)} "
             f"{power_note(per_q)} {n_q} recorded queries ({n_q // len(FAMILIES)} per family), {k} train/test splits; cluster "
             f"bootstrap over task families. Separated worker pairs within a family (paired 95% interval above 0): "
             f"{len(room)}. " + comp_note)]
    # the router at matched cost against the strongest baseline held to its budget
    # a baseline that cannot be held to the budget on the training queries in some split (no cascade of two
    # calls fits a one-call budget, say) is no competitor at matched cost: it is named, not compared
    over = sorted({a for s in splits for a, v in s.train_cost.items() if v > s.budget * (1 + 1e-6)})
    matched = [a for a in MATCHED if a not in over]
    why_not = no_room_or_floor(room, floor)
    cascade_claim = _claim_cascade_budget(splits, label, qids, seed, why_not, comp_note, fams)
    if not matched:
        return out + [Claim(
            statement=f"router (SFT + sep-CMA-ES) on {label} vs the strongest baseline at matched cost",
            paper_value="Fugu-Ultra 73.7 vs Opus 4.8 69.2 (SWE-Bench Pro)", measured=None, kind=Kind.EMPIRICAL,
            source=SOURCE, ruling=verdicts.uninformative(f"not at matched cost: {', '.join(over)} spent over the "
                                                          "budget on the training queries"), note=comp_note),
                      cascade_claim], {}
    cmp = against_strongest(_stack(splits, "fugu @ budget"), {a: _stack(splits, a) for a in matched},
                            clusters=fams, seed=seed)
    if why_not:
        rule = verdicts.uninformative(why_not)
    else:
        rule = verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, training_runs=k,
                                  why="vendor numbers on frontier benchmarks; sizes not comparable to this pool",
                                  control=_control(splits, "fugu, shuffled labels @ budget", cmp.strongest, fams, seed))
    fr, fc = _stack(splits, "fugu @ budget"), _stack(splits, "fugu @ budget", 1)
    picks = {a: sorted({s.picks[a] for s in splits}) for a in ("best affordable single", "cascade @ budget")}
    budget = float(np.mean([s.budget for s in splits]))
    out.append(Claim(
        statement=f"router (SFT + sep-CMA-ES) on {label} vs the strongest baseline at matched cost (best "
                  "affordable single worker, kNN, MF, cascade; each held to the router's own budget per query), "
                  "held-out success",
        paper_value="Fugu-Ultra 73.7 vs Opus 4.8 69.2 (SWE-Bench Pro), quality at near-direct-call cost",
        measured=cmp.effect, ci=cmp.ci, unit="success", kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
        baseline=_held_baselines(splits, matched, over),
        ruling=rule, falsifier=FALSIFY, replication=_family_rep(splits, fams),
        note=f"against {cmp.strongest}; {k} train/test splits of {n_q} recorded queries (every router and "
             f"baseline retrained per split); cluster bootstrap over task families. Budget = the router's own mean "
             f"measured cost on the training queries ({budget:.4f} s/query averaged over splits); picks: best "
             f"affordable {', '.join(picks['best affordable single'])}; cascade "
             f"{'; '.join(picks['cascade @ budget'])}. Router {fr.mean():.3f} at {fc.mean():.4f} s/query; best "
             f"single worker at its own cost {_stack(splits, 'best single').mean():.3f} at "
             f"{_stack(splits, 'best single', 1).mean():.4f} s; oracle {_stack(splits, 'oracle').mean():.3f}. "
             f"Headroom is measured (the workers' skills come from their adaptation, not from constants): "
             f"{len(room)} separated per-family worker pairs. "
             + power_note(_per_query(fr - _stack(splits, cmp.strongest), qids)) + " " + comp_note))
    out.append(cascade_claim)
    details = {"workers": pool.names, "accuracy": acc, "prices": {n: {k2: v for k2, v in p.items() if k2 != "rounds"}
                                                                   for n, p in pool.prices.items()},
               "price_rounds": {n: p.get("rounds") for n, p in pool.prices.items()},
               "cost_per_query": dict(zip(pool.names, pool.cost.mean(axis=0).round(5).tolist(), strict=True)),
               "headroom_pairs": room, "adapters": pool.info.get("adapters", {}),
               "record_seconds": pool.info.get("record_seconds", {}), "n_queries": n_q, "splits": k,
               "cascade_budget": [s.cascade_budget for s in splits],
               "cascade_lambda": [s.cascade_lam for s in splits],
               "table": {a: {"success": float(_stack(splits, a).mean()), "cost": float(_stack(splits, a, 1).mean())}
                         for a in splits[0].arms if all(a in s.arms for s in splits)}}
    return out, details


def measure(cfg: PoolConfig, seed: int, train_runs: int, **router_kw: Any) -> tuple[list[Claim], dict[str, Any]]:
    """Build (or load) the recorded pool and measure its claims; what the full reproduction calls."""
    from divelab.orchestration.fugu.real_workers import build

    t0 = time.perf_counter()
    pool = build(cfg, log=lambda s: None)
    assert pool is not None  # no deadline given
    t_pool = time.perf_counter() - t0
    splits = run_splits(pool, train_runs, seed, **router_kw)
    out, details = claims(pool, splits, seed)
    details.update(pool_s=t_pool, routers_s=time.perf_counter() - t0 - t_pool)
    return out, details
