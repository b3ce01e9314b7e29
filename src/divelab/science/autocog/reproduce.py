"""Reproduce E176 (AutoCog, arXiv 2606.26448) with simulated participants and programmatic roles.

Claims: the TTB–tallying–WADD dial (numerical equality at the limits); recovery of canonical and
non-canonical ground truths, against the strongest baseline that does not search (trivial pickers and a
one-experiment model selection over the known strategies); DR-WADD discovered when participants use it;
the fixed-metric and random-design ablations; how local the search stays; the noise control (random
responders); the confirmatory study with preregistered one-sided tests, and its power at the paper's
N = 25. Every claim that could turn positive carries a negative control run beside it: the same loop on
participants whose choices are shuffled across trials, linear-WADD participants for the DR-WADD claims,
cue-using participants for the noise control.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, Reproduction
from divelab.comparisons import against_strongest
from divelab.progress import track
from divelab.science.autocog.autora_bridge import autora_available, disagreement_scores
from divelab.science.autocog.baselines import (
    ShuffledChoices,
    one_experiment_pick,
    recovery_baselines,
    starting_classes,
)
from divelab.science.autocog.confirm import HYPOTHESES, ConfirmatoryResult, confirmatory_study
from divelab.science.autocog.loop import AutoCog, LoopConfig
from divelab.science.autocog.recovery import classify, probe_design
from divelab.science.autocog.roles import ProgrammaticAdvocate
from divelab.science.autocog.simulate import choice_prob, static_prob_a
from divelab.science.autocog.strategies import STRATEGIES
from divelab.science.autocog.task import Task
from divelab.science.autocog.theory import (
    Theory,
    coin_theory,
    drwadd_theory,
    tallying_theory,
    ttb_theory,
    wadd_theory,
)

# the notes give no paper section per number, so every claim cites the paper and the episode
SOURCE = "arXiv 2606.26448; week-in-review E176"
CANONICAL = ("ttb", "tallying", "wadd")
NONCANONICAL = ("drwadd", "ttw", "perseveration")
SHUFFLED = "choices shuffled across trials within each participant (no link from ratings or history to choices)"


@dataclass(frozen=True)
class Plan:
    seeds: int
    """loop runs per ground-truth strategy (each with its own participants and search seed); each is run
    again on the same participants with their choices shuffled (the negative control)."""
    cycles: int
    """design-experiment-revise cycles per loop run."""
    strategies: tuple[str, ...]
    """ground-truth strategies the simulated participants use in the main recovery runs."""
    ablation_seeds: int
    """loop runs per strategy in each ablation (random designs; a fixed JSD metric), each also on shuffled
    choices; at most ``seeds`` (the full loop's runs on the same seeds are the other arm)."""
    ablation_strategies: tuple[str, ...]
    """ground-truth strategies the ablations run on (a subset of ``strategies``)."""
    noise_seeds: int
    """loop runs on random responders (the noise control)."""
    n_power: int
    """simulated fresh cohorts behind the confirmatory tests' power."""


PLANS = {
    "smoke": Plan(seeds=1, cycles=2, strategies=("ttb", "wadd", "drwadd"), ablation_seeds=1,
                  ablation_strategies=("drwadd",), noise_seeds=1, n_power=20),
    "quick": Plan(seeds=3, cycles=5, strategies=CANONICAL + NONCANONICAL, ablation_seeds=3,
                  ablation_strategies=NONCANONICAL, noise_seeds=3, n_power=200),
    "full": Plan(seeds=10, cycles=20, strategies=CANONICAL + NONCANONICAL, ablation_seeds=10,
                 ablation_strategies=NONCANONICAL, noise_seeds=10, n_power=1000),
}


def run_recovery(strategy: str, seed: int, cycles: int, *, design: str = "optimised",
                 metric: str = "adaptive", shuffled: bool = False) -> dict:
    """One loop on participants using ``strategy`` (their choices permuted across trials when ``shuffled``: the
    negative control); the winner's behavioural class after every cycle."""
    model = STRATEGIES[strategy]
    loop = AutoCog(ShuffledChoices(model) if shuffled else model, LoopConfig(metric=metric), seed=seed,
                   advocate=ProgrammaticAdvocate(design=design))
    classes, winners = [], []
    for c in range(cycles):
        loop.step(c)
        w = loop.winner
        winners.append(w)
        classes.append(classify(w, loop.task, seed=0))
    ok = [k == strategy for k in classes]
    first = next((i + 1 for i in range(cycles) if all(ok[i:])), None)
    final = winners[-1]
    # model selection without a loop, on the same participants' strategy and seed (a baseline for recovery)
    pick = None if shuffled else one_experiment_pick(model, loop.task, seed)
    return {"strategy": strategy, "seed": seed, "design": design, "metric": metric, "shuffled": shuffled,
            "classes": classes, "recovered": bool(ok[-1]), "cycles_to_recovery": first, "winner": final.to_dict(),
            "winner_text": final.describe(), "outside_family": not final.in_starting_family(),
            "accepted_experiments": len(loop.experiments), "theories_tried": len(loop.history),
            "one_experiment_pick": pick}


def _dial_errors(task: Task) -> dict[str, float]:
    """max |P(grammar) - P(strategy)| over probe pairs and parameter draws, at each end of the dial."""
    pairs = probe_design(task).array
    rng = np.random.default_rng(0)
    params = {"beta": rng.uniform(1, 12, 50), "eps": rng.uniform(0, 0.2, 50), "kappa": np.zeros(50),
              "alpha": rng.uniform(0.2, 0.5, 50)}
    left = np.broadcast_to(pairs[None, :, 0], (50, *pairs[:, 0].shape))
    right = np.broadcast_to(pairs[None, :, 1], (50, *pairs[:, 1].shape))
    out = {}
    ends = {"ttb (lexicographic switch)": (ttb_theory(), "ttb"),
            "ttb (gamma=2000, tau=0)": (Theory(gamma=2000.0, tau=0.0), "ttb"),
            "tallying (gamma=0, tau=0)": (tallying_theory(), "tallying"),
            "wadd (gamma=1, tau=1, alpha=1)": (wadd_theory(), "wadd"),
            "ttw (lexicographic, order=worst)": (Theory(lexicographic=True, tau=0.0, order="worst"), "ttw")}
    for label, (th, name) in ends.items():
        s = STRATEGIES[name]
        out[label] = float(np.max(np.abs(choice_prob(params, th.score(params, left, right, task))
                                          - choice_prob(params, s.score(params, left, right, task)))))
    # DR-WADD: one alpha at a time (the grammar's alpha is a fixed term)
    errs = []
    for a in (0.3, 0.5, 0.7):
        p = dict(params, alpha=np.full(50, a))
        errs.append(np.max(np.abs(choice_prob(p, drwadd_theory(a).score(p, left, right, task))
                                  - choice_prob(p, STRATEGIES["drwadd"].score(p, left, right, task)))))
    out["drwadd (alpha<1)"] = float(max(errs))
    return out


def _key(r: dict) -> tuple[str, int]:
    return (r["strategy"], r["seed"])


def _paired(a: list[dict], b: list[dict]) -> tuple[list[dict], list[dict]]:
    """Two arms sorted by (strategy, seed); they must cover the same runs."""
    a, b = sorted(a, key=_key), sorted(b, key=_key)
    if [_key(r) for r in a] != [_key(r) for r in b]:
        raise ValueError("the arms must cover the same (strategy, seed) runs")
    return a, b


def _recovered(runs: list[dict]) -> np.ndarray:
    return np.array([r["recovered"] for r in runs], float)


def _by_strategy(runs: list[dict]) -> str:
    return ", ".join(f"{s} {sum(r['recovered'] for r in runs if r['strategy'] == s)}/"
                     f"{sum(r['strategy'] == s for r in runs)}" for s in dict.fromkeys(r["strategy"] for r in runs))


def _diff_claim(a: list[dict], b: list[dict], a_ctl: list[dict], b_ctl: list[dict], statement: str, paper: str,
                paper_effect: float, baseline: str, note: str, seed: int) -> Claim:
    """``a`` recovers more than ``b`` on the same (strategy, seed) runs; the control is both arms on shuffled choices."""
    # paired by (strategy, seed); runs of one strategy are not independent, so whole strategies are resampled
    a, b = _paired(a, b)
    a_ctl, b_ctl = _paired(a_ctl, b_ctl)
    if [_key(r) for r in a] != [_key(r) for r in a_ctl]:
        raise ValueError("the negative control must cover the same (strategy, seed) runs as the claim")
    xa, xb = _recovered(a), _recovered(b)
    clusters = [r["strategy"] for r in a]
    eff, lo, hi = stats.cluster_diff_ci(xa, xb, clusters, seed=seed)
    ce, clo, chi = stats.cluster_diff_ci(_recovered(a_ctl), _recovered(b_ctl), clusters, seed=seed)
    return Claim(statement=statement, paper_value=paper, measured=eff, ci=(lo, hi), unit="recovery-rate difference",
                 kind=Kind.PLANTED, source=SOURCE, baseline=f"{baseline}: {xb.mean():.2f} recovered",
                 ruling=verdicts.direction(eff, (lo, hi), expected_sign=1, paper=paper_effect, tol=0.5,
                                           control=verdicts.control(f"both arms on {SHUFFLED}", ce, (clo, chi))),
                 falsifier=f"The difference is ≤ 0 when the {baseline} recovers the ground truth as often as the full "
                           "loop on the same participants and seeds; which theory either loop ends on is not fixed by "
                           "our code, though the strategies they must find are ours (planted).",
                 replication={"unit": "loop runs", "n": len(xa), "clustered_by": "ground-truth strategy"},
                 note=note + f" Cluster bootstrap over strategies, paired by run ({len(xa)} runs). Per strategy, this "
                             f"arm: {_by_strategy(a)}; the {baseline}: {_by_strategy(b)}. On shuffled choices: "
                             f"{_by_strategy(a_ctl)} vs {_by_strategy(b_ctl)}.")


class Runs(list):
    """Every loop run of the reproduction, with the selection the claims read."""

    def sel(self, strats: tuple[str, ...], design: str = "optimised", metric: str = "adaptive",
            seed_list: list[int] | None = None, shuffled: bool = False) -> list[dict]:
        return [r for r in self if r["strategy"] in strats and r["design"] == design and r["metric"] == metric
                and r["shuffled"] == shuffled and (seed_list is None or r["seed"] in seed_list)]


def _ablation_seeds(plan: Plan, seed: int) -> list[int]:
    return [seed + i for i in range(plan.ablation_seeds)]


def run(plan: Plan, seed: int) -> Reproduction:
    if plan.ablation_seeds > plan.seeds or not set(plan.ablation_strategies) <= set(plan.strategies):
        raise ValueError("the ablations reuse the main runs as their full-loop arm: ablation_seeds must be <= seeds "
                         "and ablation_strategies a subset of strategies")
    task = Task()
    runs = _run_loops(plan, seed)
    rep = Reproduction(system="autocog", title="AutoCog: an automated cognitive scientist (simulated participants)",
                       scale="", seed=seed)
    errs = _dial_errors(task)
    start = starting_classes(LoopConfig().start, task)
    rep.claims += _claims_dial(errs)
    rec_claims, recovery = _claims_recovery(runs, plan, start, seed)
    rep.claims += rec_claims
    rep.claims += _claims_drwadd(runs)
    rep.claims += _claims_ablations(runs, plan, seed)
    rep.claims += _claims_locality(runs, plan, seed)
    rep.claims += _claims_noise_control(runs, task, seed)
    conf_claims, conf = _claims_confirmatory(runs, task, plan, seed)
    rep.claims += conf_claims
    _, impl = disagreement_scores(probe_design(task).array[:2], [ttb_theory(), coin_theory()], task)
    rep.setup = (f"Simulated participants (N=25 per experiment, 96 trials, 4 experts with validities 0.9/0.8/0.7/0.6, "
                 f"ratings 0–10) from known strategies; two programmatic advocates start from weighted tally vs "
                 f"unit-weight add; designs are ranked by model disagreement ({impl}) and checked by simulation "
                 f"(50 synthetic participants per theory, Welch p<0.01 at N=25); theories are scored by the "
                 f"normalised generative loss over all observations; the arbiter names the loser and a local search "
                 f"in the grammar rewrites it (strict accept gate; after a stall, a discriminable new theory within "
                 f"0.05 loss). {plan.cycles} cycles, {plan.seeds} seed(s) per strategy, each run again on the same "
                 f"participants with their choices shuffled across trials (the negative control). No LLM (the roles "
                 "are pluggable).")
    rep.planted = ("Every participant is simulated from a strategy we coded (TTB, tallying, WADD, DR-WADD, "
                   "take-the-worst, perseveration, or coin flips), and each of these strategies is a point of the "
                   "theory grammar the loop searches, so recovering it, discovering DR-WADD, leaving the starting "
                   "family only when the truth lies outside it, the ablations and the confirmatory cohort all "
                   "follow from our strategies and our search. The planted strategies are also easy to tell apart: "
                   "one random experiment scored against the known strategies names each of them (the recovery "
                   "claims' strongest baseline). No claim here is about real people.")
    rep.details = {"runs": list(runs), "dial_errors": errs, "starting_classes": start, "recovery": recovery,
                   "confirmatory": conf.to_dict(),
                   "autora": {"installed": autora_available(), "disagreement_implementation": impl}}
    return rep


def _run_loops(plan: Plan, seed: int) -> Runs:
    """The main recovery runs, the two ablations (random designs; a fixed JSD metric), each also on shuffled
    choices, and the noise control."""
    seeds = [seed + i for i in range(plan.seeds)]
    ab_seeds = _ablation_seeds(plan, seed)
    jobs = []
    for shuffled in (False, True):
        jobs += [(s, sd, "optimised", "adaptive", shuffled) for s in plan.strategies for sd in seeds]
        jobs += [(s, sd, "random", "adaptive", shuffled) for s in plan.ablation_strategies for sd in ab_seeds]
        jobs += [(s, sd, "optimised", "jsd", shuffled) for s in plan.ablation_strategies for sd in ab_seeds]
    jobs += [("random", seed + i, "optimised", "adaptive", False) for i in range(plan.noise_seeds)]
    return Runs(run_recovery(s, sd, plan.cycles, design=d, metric=m, shuffled=sh)
                for s, sd, d, m, sh in track(jobs, "autocog loops"))


def _claims_dial(errs: dict[str, float]) -> list[Claim]:
    """TTB, tallying and WADD are points of one grammar (a numerical check of two formulas)."""
    worst = max(errs.values())
    return [Claim(statement="TTB, tallying and WADD (and DR-WADD, take-the-worst) are points of one grammar: its "
                            "choice probabilities equal the independently coded strategies at the dial's limits",
                  paper_value="TTB, Tallying and WADD are endpoints of one dial", measured=worst,
                  unit="max |ΔP| over probe pairs × 50 parameter draws", kind=Kind.CHECK, source=SOURCE,
                  # a deterministic numerical comparison of two formulas, not a sample
                  ruling=verdicts.bound(worst, 1e-9, exact=True),
                  note="; ".join(f"{k}: {v:.1e}" for k, v in errs.items())
                       + ". TTB is the gamma→∞ limit (tau=0); the lexicographic switch reaches it exactly.")]


def _claims_recovery(runs: Runs, plan: Plan, start: list[str], seed: int) -> tuple[list[Claim], dict]:
    """Recovery of canonical and non-canonical ground truths, against the strongest picker that does not search."""
    out, details = [], {}
    for group, which, paper in ((CANONICAL, "canonical (TTB, tallying, WADD)",
                                 "recovered within ≤5 cycles (≥2/3 seeds)"),
                                (NONCANONICAL, "non-canonical (DR-WADD, take-the-worst, perseveration)",
                                 "recovered (perseveration 3/3, take-the-worst 2/3 with the adaptive metric); "
                                 "rare strategies need ~20 cycles")):
        strats = tuple(s for s in group if s in plan.strategies)
        if not strats:
            continue
        main, ctl = _paired(runs.sel(strats), runs.sel(strats, shuffled=True))
        clusters = [r["strategy"] for r in main]
        base = recovery_baselines(main, start)
        cmp = against_strongest(_recovered(main), base, clusters=clusters, seed=seed)
        best = np.asarray(base[cmp.strongest])
        ce, clo, chi = stats.cluster_diff_ci(_recovered(ctl), best, clusters, seed=seed)
        k, n = int(_recovered(main).sum()), len(main)
        rate_ci = stats.proportion_ci(k, n)
        cyc = [r["cycles_to_recovery"] for r in main if r["cycles_to_recovery"]]
        # resampling k strategies draws the constant pick's own strategy k times with probability (1/k)^k: for
        # k <= 3 that is above 2.5 %, so the interval's far end always reaches a gain of 0 over that pick
        thin = (f" With {len(strats)} strategies a constant pick is right on one of them, and the cluster interval "
                "cannot separate any gain from it." if len(strats) <= 3 else "")
        tie = (f" The strongest baseline ({cmp.strongest}) names the ground truth in every run the loop does: this "
               "test cannot tell the loop's search from knowing the candidate strategies."
               if cmp.ci[0] == cmp.ci[1] == 0.0 else "")
        details[which] = {"loop_rate": k / n, "loop_rate_ci": list(rate_ci), "baselines": cmp.baselines,
                          "shuffled_rate": float(_recovered(ctl).mean())}
        out.append(Claim(
            statement=f"The loop recovers {which} ground truths within {plan.cycles} cycles more often than the "
                      "strongest picker that does not search",
            paper_value=paper, measured=cmp.effect, ci=cmp.ci, unit="recovery-rate gain over the strongest baseline",
            kind=Kind.PLANTED, source=SOURCE, baseline=f"{cmp.strongest}: {best.mean():.2f} recovered",
            **cmp.claim_fields(),
            ruling=verdicts.direction(cmp.effect, cmp.ci, expected_sign=1,
                                      why="the paper reports the loop's recovery rate (compared in the note), "
                                          "not a gain over a picker that does not search",
                                      control=verdicts.control(f"the loop on {SHUFFLED}", ce, (clo, chi))),
            falsifier="The gain is ≤ 0 when a picker that never searches (a constant or starting-theory pick, or one "
                      "random experiment scored against the known strategies) names the ground truth as often as the "
                      "loop's final theory does; which theory the loop ends on is not fixed by our code, though the "
                      "strategies it must find are ours and lie in its grammar (planted).",
            replication={"unit": "loop runs", "n": n, "clustered_by": "ground-truth strategy"},
            note=f"Loop recovery rate {k}/{n} [{rate_ci[0]:.2f}, {rate_ci[1]:.2f}] (Wilson over runs; the paper: "
                 f"{paper}); per strategy: {_by_strategy(main)}. On shuffled choices: {_by_strategy(ctl)}. Recovered "
                 "= the final winner behaves most like the ground truth on a held-out probe battery. Mean cycles "
                 f"to stable recovery {np.mean(cyc) if cyc else float('nan'):.1f}. The starting theories (weighted "
                 f"tally, unit-weight add) are no ground truth as programs, but on the probe battery they already "
                 f"behave like {start[0]} and {start[1]}. Cluster bootstrap over strategies, paired by run.{thin}{tie}"))
    return out, details


def _concave(r: dict) -> bool:
    w = r["winner"]
    return bool(w["cue_use"] and w["alpha"] < 1.0 and not w["lexicographic"])


def _claims_drwadd(runs: Runs) -> list[Claim]:
    """DR-WADD discovered, in its diminishing-sensitivity form; linear-WADD participants are the control."""
    dr = runs.sel(("drwadd",))
    if not dr:
        return []
    k = sum(_concave(r) for r in dr)
    ctl, ctl_name = runs.sel(("wadd",)), "linear-WADD participants (alpha = 1: no diminishing sensitivity)"
    if not ctl:
        ctl, ctl_name = runs.sel(("drwadd",), shuffled=True), f"DR-WADD participants, {SHUFFLED}"
    kc = sum(_concave(r) for r in ctl)
    return [Claim(statement="When participants use DR-WADD, the loop discovers a compensatory theory with "
                            "concave utilities (alpha < 1: diminishing sensitivity)",
                  paper_value="Diminishing Returns WADD, u(x)=(x+1)^alpha, 0<alpha<1, surfaced by the loop",
                  measured=f"{k}/{len(dr)} runs", kind=Kind.PLANTED, source=SOURCE,
                  ruling=verdicts.found(k, len(dr), control={"name": ctl_name, "count": kc, "trials": len(ctl)}),
                  falsifier="No run counts when the loop's final theory on DR-WADD participants is linear, "
                            "lexicographic or cue-free; the grammar offers alpha both below and above 1, so the "
                            "search could end on either side.",
                  replication={"unit": "loop runs on DR-WADD participants", "n": len(dr), "clustered_by": ""},
                  note="Final winners: " + "; ".join(r["winner_text"] for r in dr)
                       + f". Control ({ctl_name}): {kc}/{len(ctl)} runs end on a concave compensatory theory. "
                         "Participants' alpha ~ U(0.2, 0.5); the grammar offers alpha in {0.3, 0.5, 0.7, 1, 1.5}.")]


def _claims_ablations(runs: Runs, plan: Plan, seed: int) -> list[Claim]:
    """The fixed-metric and random-design ablations, against the full loop on the same strategies and seeds."""
    ab, sl = plan.ablation_strategies, _ablation_seeds(plan, seed)
    adaptive, adaptive_ctl = runs.sel(ab, seed_list=sl), runs.sel(ab, seed_list=sl, shuffled=True)
    if not adaptive:
        return []
    return [_diff_claim(adaptive, runs.sel(ab, metric="jsd"), adaptive_ctl, runs.sel(ab, metric="jsd", shuffled=True),
                        "Adaptive metrics recover non-canonical strategies that a fixed distance (JSD between per-pair "
                        "choice distributions) misses", "fixed JSD: perseveration 0/3, take-the-worst 0/3; adaptive: "
                        "3/3, 2/3", 5 / 6, "fixed-JSD loop",
                        "Same strategies and seeds; the JSD loop scores per-pair choice rates only (no sequence), yet "
                        "it can still catch perseveration: perseverating participants' pooled per-pair rates are "
                        "overdispersed, and a theory with a history term reproduces that dispersion.", seed),
            _diff_claim(adaptive, runs.sel(ab, design="random"), adaptive_ctl,
                        runs.sel(ab, design="random", shuffled=True),
                        "Optimised designs recover more strategies than random (blind) designs",
                        "blind design recovers only TTB; optimised design needed for non-canonical strategies", 2 / 3,
                        "random-design loop", "Same strategies and seeds; blind designs draw pairs at random from the "
                        "same pool (the simulation check and metrics are unchanged).", seed)]


def _claims_locality(runs: Runs, plan: Plan, seed: int) -> list[Claim]:
    """How local the search stays: it leaves the starting family mostly when the truth lies outside it."""
    main = runs.sel(plan.strategies)
    need = [r for r in main if r["strategy"] in NONCANONICAL]
    inside = [r for r in main if r["strategy"] in CANONICAL]
    if not (need and inside):
        return []
    # the unit is the ground-truth strategy (runs of one strategy are not independent): per-strategy rates
    xa = np.array([np.mean([r["outside_family"] for r in need if r["strategy"] == s])
                   for s in dict.fromkeys(r["strategy"] for r in need)])
    xb = np.array([np.mean([r["outside_family"] for r in inside if r["strategy"] == s])
                   for s in dict.fromkeys(r["strategy"] for r in inside)])
    eff, lo, hi = stats.diff_ci(xa, xb, seed=seed)
    return [Claim(statement="The search leaves the starting TTB–tallying–WADD family more often when the ground "
                            "truth lies outside it",
                  paper_value="the search stayed largely local (within the WADD family)", measured=eff, ci=(lo, hi),
                  unit="rate(outside | truth outside) − rate(outside | truth inside)", kind=Kind.BY_CONSTRUCTION,
                  source="week-in-review E176 (review's critique)",
                  baseline=f"truth inside the family: {xb.mean():.2f} of runs end outside",
                  ruling=verdicts.direction(eff, (lo, hi), expected_sign=1, why="the review gives no rate"),
                  falsifier="The difference is ≤ 0 when runs whose truth lies inside the family end outside it as "
                            "often as runs whose truth lies outside.",
                  replication={"unit": "ground-truth strategies", "n": len(xa) + len(xb), "clustered_by": ""},
                  note=f"Truth outside: {xa.mean():.2f} of runs end outside the family; inside: {xb.mean():.2f}. By "
                       "construction: every non-canonical truth lies outside the family as defined (alpha < 1, "
                       "cue order reversed, or a history term), so each recovery of one is a run that left it; the "
                       "reviser is a local search (one edit, two through a switch), the review's 'local search' "
                       "seam by construction of our reviser. Runs on canonical truths that end outside the family "
                       "(wider lapse or a history term, same behaviour class) show the 'only when' half does not "
                       "hold.")]


def _coin_deviation(r: dict, task: Task) -> float:
    """Mean |P(A) − 0.5| over the probe pairs of a run's final theory (no history: static choice rates)."""
    pa = static_prob_a(Theory.from_dict(r["winner"]), probe_design(task).array, task, 500, np.random.default_rng(0))
    return float(np.mean(np.abs(pa - 0.5)))


def _claims_noise_control(runs: Runs, task: Task, seed: int) -> list[Claim]:
    """Random responders: the selected theory should predict coin flips (no apophenia)."""
    noise = runs.sel(("random",))
    if not noise:
        return []
    devs = np.array([_coin_deviation(r, task) for r in noise])
    dev_ci = stats.bootstrap_ci(devs, seed=seed, method="percentile")
    # the control: participants who do use the cues; their winners must not look like coin flips
    cue_users = runs.sel(("ttb", "tallying", "wadd", "drwadd", "ttw"))
    control: dict = {"none": "no cue-using strategy is in this plan"}
    if cue_users:
        cdev = np.array([_coin_deviation(r, task) for r in cue_users])
        control = verdicts.control("cue-using participants (the main runs on TTB, tallying, WADD, DR-WADD, "
                                   "take-the-worst)", float(cdev.mean()),
                                   stats.bootstrap_ci(cdev, seed=seed, method="percentile"))
    return [Claim(statement="Random responders: the selected theory is indistinguishable from a coin flip "
                            "(no apophenia)",
                  paper_value="pure-noise participants → theories equivalent to random guessing",
                  measured=float(devs.mean()), ci=dev_ci,
                  unit="mean over runs of mean |P(A) − 0.5| on the probe pairs", kind=Kind.PLANTED, source=SOURCE,
                  baseline="coin-flip theory: 0",
                  ruling=verdicts.bound(float(devs.mean()), 0.05, ci=dev_ci, control=control),
                  falsifier="The bound fails when the loop's final theory on coin-flip participants predicts choices "
                            "more than 0.05 away from one half on average, as a cue-using or biased theory would; "
                            "the grammar holds many such theories and the search is free to end on one.",
                  replication={"unit": "loop runs on random responders", "n": len(noise), "clustered_by": ""},
                  note="Winners: " + "; ".join(f"{r['winner_text']} (class {r['classes'][-1]})" for r in noise)
                       + f". Worst run {devs.max():.3f}. The loop also kept searching: "
                         f"{np.mean([r['theories_tried'] for r in noise]):.1f} theories held per run. Bootstrap over "
                         "runs.")]


def _claims_confirmatory(runs: Runs, task: Task, plan: Plan, seed: int) -> tuple[list[Claim], ConfirmatoryResult]:
    """The confirmatory study on a fresh cohort, and how much power one such study has at N = 25."""
    dr = runs.sel(("drwadd",))
    frozen = Theory.from_dict(dr[0]["winner"]) if dr else drwadd_theory(0.5)
    if frozen.alpha >= 1.0 or not frozen.cue_use or frozen.lexicographic:
        frozen_note = f"the loop's winner ({frozen.describe()}) is not DR-WADD-like; the confirmatory study froze " \
                      "the reference DR-WADD (alpha=0.5) instead"
        frozen = drwadd_theory(0.5)
    else:
        frozen_note = f"frozen theory = the loop's winner on DR-WADD participants ({frozen.describe()})"
    conf = confirmatory_study(frozen, STRATEGIES["drwadd"], task, n=25, seed=seed + 1000, n_power=plan.n_power)
    # the negative control: the same frozen plan and tests on a fresh cohort of linear-WADD participants
    sham = confirmatory_study(frozen, STRATEGIES["wadd"], task, n=25, seed=seed + 1000, n_power=0)
    allp = all(conf.pvalues[h] < 0.05 for h in HYPOTHESES)
    sham_p = all(sham.pvalues[h] < 0.05 for h in HYPOTHESES)
    out = [Claim(statement="Confirmatory study: frozen predictions, a fresh cohort of 25, three preregistered "
                           "one-sided tests all significant at 0.05",
                 paper_value="H1 p=5.6e-4, H2 p=3e-5, H3 p=0.036",
                 measured=", ".join(f"{h} p={conf.pvalues[h]:.2g}" for h in HYPOTHESES), kind=Kind.PLANTED,
                 source=SOURCE,
                 ruling=verdicts.outcome(allp, test="H1, H2 and H3 each one-sided p < 0.05",
                                         paper_size="H1 p=5.6e-4, H2 p=3e-5, H3 p=0.036",
                                         control={"name": "a fresh cohort of linear-WADD participants (no "
                                                          "diminishing sensitivity)", "passed": sham_p}),
                 falsifier="Any of H1–H3 at p ≥ 0.05 on the fresh cohort fails it; the hypotheses, the design and "
                           "the frozen predictions are fixed before the cohort is drawn.",
                 replication={"unit": "simulated participants (one cohort)", "n": conf.n, "clustered_by": ""},
                 note=f"{frozen_note}. Hypotheses: " + "; ".join(f"{h}: {t}" for h, t in HYPOTHESES.items())
                      + f". Observed: {conf.observed}; frozen: {conf.frozen}. Holm-adjusted: "
                      + ", ".join(f"{h} {q:.2g}" for h, q in zip(HYPOTHESES, stats.holm(list(conf.pvalues.values())),
                                                                   strict=True))
                      + ". Control cohort (linear WADD): "
                      + ", ".join(f"{h} p={sham.pvalues[h]:.2g}" for h in HYPOTHESES) + ".")]
    pw_min = min(conf.power[h] for h in HYPOTHESES)
    k_all = int(round(conf.power["all"] * conf.power_n_cohorts))
    lo, hi = stats.proportion_ci(k_all, conf.power_n_cohorts)
    # power is a rate over simulated cohorts: the bound reads its Wilson interval
    pw_ci = stats.proportion_ci(int(round(pw_min * conf.power_n_cohorts)), conf.power_n_cohorts)
    out.append(Claim(statement="How thin is one confirmation: power of the preregistered tests at the paper's N = 25",
                     paper_value="one confirmatory study, N = 25 per experiment (the review: 'the confirmation was "
                                 "thin')",
                     measured=pw_min, ci=pw_ci, unit="lowest single-test power", kind=Kind.BY_CONSTRUCTION,
                     source=SOURCE, ruling=verdicts.bound(pw_min, 0.8, sense=">=", ci=pw_ci),
                     replication={"unit": "simulated cohorts", "n": conf.power_n_cohorts, "clustered_by": ""},
                     note=f"Power per test over {conf.power_n_cohorts} fresh simulated cohorts: "
                          + ", ".join(f"{h} {conf.power[h]:.2f}" for h in HYPOTHESES)
                          + f"; all three together {conf.power['all']:.2f} [{lo:.2f}, {hi:.2f}]. A property of our "
                            "simulated population (alpha ~ U(0.2, 0.5), beta ~ U(4, 12)), not of real people."))
    return out, conf
