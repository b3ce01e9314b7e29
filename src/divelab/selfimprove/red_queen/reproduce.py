"""Reproduce E178 (Red Queen Gödel Machine) in the controlled writer/judge world and the HumanEval
program world (:mod:`reproduce_programs`).

Every arm runs the same loop (:func:`divelab.selfimprove.red_queen.rqgm.run`) with the same budget
and seeds; comparisons are paired over seeds (the world, its anchor and the loop's random stream
are seeded by the seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import progress, stats, verdicts
from divelab.claims import Claim, Kind, Reproduction, not_checkable
from divelab.comparisons import against_strongest
from divelab.selfimprove.red_queen import real_llm, reproduce_programs
from divelab.selfimprove.red_queen.bestbelief import checkpoint_bound, checkpoints
from divelab.selfimprove.red_queen.real_llm import RoundConfig
from divelab.selfimprove.red_queen.rqgm import RQGMConfig
from divelab.selfimprove.red_queen.rqgm import run as run_loop
from divelab.selfimprove.red_queen.world_synthetic import SyntheticWorld

SOURCE = "arXiv 2606.26294; week-in-review E178"
ARMS = {  # name: (mode, adversarial, lenient anchor, anchor labels shuffled)
    "fixed": ("fixed", False, False, False), "self_judge": ("self_judge", False, False, False),
    "no_erasure": ("no_erasure", False, False, False), "rqgm": ("rqgm", False, False, False),
    "rqgm_adversarial": ("rqgm", True, False, False), "rqgm_lenient_anchor": ("rqgm", False, True, False),
    # the negative control of the method comparison: the anchor's labels permuted, so replacement cannot pick
    # judges that are right more often
    "rqgm_shuffled_anchor": ("rqgm", False, False, True),
}
LENIENT_SHIFT = 0.6  # the lenient anchor labels "good" from q > tau - 0.6


@dataclass(frozen=True)
class Plan:
    seeds: int
    """runs of every arm in the controlled writer/judge world (comparisons are paired over them)."""
    budget: int
    """evaluations each loop run may spend."""
    eval_items: int
    """fresh items per source (AI, human) on which each final judge is measured."""
    programs: reproduce_programs.Plan
    """the HumanEval program world: tasks, runs per task and arm, evaluation budget."""
    real_llm: RoundConfig | None
    """a replacement round with SmolLM2-135M-Instruct as the judge (:mod:`.real_llm`, minutes of CPU), sized by
    this sub-plan; None skips it."""


# the program world runs every task of reproduce_programs.TASKS at quick and full (its headline resamples whole
# tasks, so the task count is what its interval rests on); quick buys that with fewer evaluations per run
PLANS = {
    "smoke": Plan(seeds=3, budget=120, eval_items=80, programs=reproduce_programs.Plan(tasks=2, seeds=2, budget=150),
                  real_llm=None),
    "quick": Plan(seeds=16, budget=600, eval_items=300,
                  programs=reproduce_programs.Plan(tasks=len(reproduce_programs.TASKS), seeds=10, budget=400),
                  real_llm=None),
    "full": Plan(seeds=40, budget=2000, eval_items=1000,
                 programs=reproduce_programs.Plan(tasks=len(reproduce_programs.TASKS), seeds=20, budget=1000),
                 real_llm=RoundConfig()),
}


def run_arm(arm: str, seed: int, budget: int, eval_items: int) -> dict[str, Any]:
    mode, adv, lenient, shuffled = ARMS[arm]
    world = SyntheticWorld(seed=seed, adversarial=adv)
    if lenient:
        world.anchor_tau = world.tau - LENIENT_SHIFT
    res = run_loop(world, RQGMConfig(budget=budget, mode=mode, adversarial=adv, shuffle_anchor=shuffled), seed=seed)
    # a trivial baseline: the final answer picked uniformly from the same archive instead of by best-belief
    nodes = res.archive.nodes
    random_node = nodes[int(np.random.default_rng([seed, 29]).integers(len(nodes)))]
    pool = world.eval_items(eval_items)
    ws = world.writer_stats(res.final_writer, res.final_judge)
    frozen = world.writer_stats(res.final_writer, res.initial_judge)
    rhos = [r.spearman for r in res.replacements if r.spearman is not None]
    return {"true_quality": ws["true_quality"], "random_node_quality": world.true_quality(random_node.writer),
            "judged_accept": ws["judged_accept"],
            "judged_accept_initial_judge": frozen["judged_accept"], "agreement": ws["judge_agreement"],
            "agreement_initial_judge": frozen["judge_agreement"], "judge": world.judge_stats(res.final_judge, pool),
            "replacements": len(res.replacements), "spearman": float(np.mean(rhos)) if rhos else None,
            "checkpoints": len(res.checkpoints), "erased": res.archive.erased, "rescored": res.rescored,
            "nodes": len(res.archive.nodes), "evaluations": res.evaluations}


def _col(rows: list[dict], key: str, sub: str | None = None) -> np.ndarray:
    return np.array([r[key][sub] if sub else r[key] for r in rows], dtype=float)


def lenient_anchor_judge_claims(results: dict[str, list[dict]], seed: int = 0) -> list[Claim]:
    """What a lenient anchor does to the judge itself (paired over seeds, final judges on fresh items):
    its ground-truth accuracy, its accept rate and its AI/human bias. The anchor's labels are our
    constant (``LENIENT_SHIFT``) and replacement keeps the judge that agrees with them best, so the
    direction follows from how the world is built: these claims are ``planted``."""
    len_, cor = results["rqgm_lenient_anchor"], results["rqgm"]
    out = []
    for key, what, sign, paper in (
            ("accuracy", "ground-truth accuracy of the final judge", -1, "a wrong anchor misleads the judge"),
            ("accept_rate", "accept rate of the final judge", 1, "a lenient anchor makes the judge lenient")):
        d, lo, hi = stats.paired_diff_ci(_col(len_, "judge", key), _col(cor, "judge", key))
        out.append(Claim(statement=f"lenient anchor minus correct anchor: {what}",
                         paper_value=f"everything hinges on anchor quality ({paper}; no number)", measured=d,
                         ci=(lo, hi), kind=Kind.PLANTED, source=SOURCE + " (limits)",
                         baseline=f"correct anchor: {_col(cor, 'judge', key).mean():.3f}",
                         replication=_seeds(len(cor)),
                         ruling=verdicts.direction(d, (lo, hi), expected_sign=sign, why="the paper gives no number"),
                         note=f"lenient anchor: {_col(len_, 'judge', key).mean():.3f}; judges measured on fresh "
                              "AI and human items, labelled by the true threshold"))
    # bias: distance of the AI/human acceptance ratio from parity (1)
    gap_len = np.abs(_col(len_, "judge", "ratio") - 1.0)
    gap_cor = np.abs(_col(cor, "judge", "ratio") - 1.0)
    d, lo, hi = stats.paired_diff_ci(gap_len, gap_cor)
    out.append(Claim(statement="lenient anchor minus correct anchor: the final judge's AI/human bias, |ratio − 1|",
                     paper_value="everything hinges on anchor quality (no number)", measured=d, ci=(lo, hi),
                     kind=Kind.PLANTED, source=SOURCE + " (limits)", unit="|AI/human acceptance ratio − 1|",
                     replication=_seeds(len(cor)),
                     baseline=f"correct anchor: |ratio − 1| = {gap_cor.mean():.3f}",
                     ruling=verdicts.direction(d, (lo, hi), expected_sign=1, why="the paper gives no number"),
                     note=f"mean ratio {_col(len_, 'judge', 'ratio').mean():.2f} (lenient) vs "
                          f"{_col(cor, 'judge', 'ratio').mean():.2f} (correct)"))
    return out


def run(plan: Plan, seed: int) -> Reproduction:
    seeds = [seed * 1000 + s for s in range(plan.seeds)]
    R = _run_arms(plan, seeds)
    init = _initial(plan, seeds)
    rep = Reproduction(
        system="red-queen", title="Red Queen Gödel Machine: co-evolving agents and their judges", scale="",
        seed=seed,
        setup=(f"Controlled world (world_synthetic.py): items are 7 features (4 quality, 2 'hack', 1 style); a writer "
               f"is a generator under an effort budget, the initial judge underweights quality, likes the hack "
               f"features, prefers the AI style and is over-strict. Archive tree with clade Thompson sampling, "
               f"UCB-Air (alpha 0.6), checkpoints 8·2^k, BB_0.1 on a 120-item anchor, selective erasure. "
               f"{len(ARMS)} arms × {plan.seeds} seeds × budget {plan.budget} evaluations; judge statistics on "
               f"{plan.eval_items} fresh items per source. Programmatic writers and judges (no LLM)."),
    )
    rep.details = {"initial_writer": init["writer"], "initial_judge_ratio": init["ratio"].tolist(),
                   "arms": {a: {k: (float(np.mean(_col(rs, k))) if k not in ("judge", "spearman") else None)
                                for k in ("true_quality", "judged_accept", "agreement", "replacements", "erased",
                                          "rescored", "nodes")} | {
                       "judge_accuracy": float(np.mean(_col(rs, "judge", "accuracy"))),
                       "judge_ratio": float(np.mean(_col(rs, "judge", "ratio"))),
                       "judge_accept_rate": float(np.mean(_col(rs, "judge", "accept_rate")))}
                            for a, rs in R.items()}}
    rep.claims += _claims_goodhart(R, init)
    rep.claims += _claims_against_baselines(R, init, seed)
    rep.claims += _claims_adversarial_objective(R, init)
    rep.claims += _claims_less_strict(R, init)
    rep.claims += _claims_anchor(R, seed)
    rep.claims += _claims_bookkeeping(R, plan)
    rep.planted = ("In the controlled world the initial judge is biased by our constants: it underweights quality, "
                   "rewards two 'hack' features, is over-strict, and its style weight is set so its AI/human "
                   "acceptance ratio is near the paper's 1.9x; so the Goodhart drop under that frozen judge, the "
                   "ratio falling to about 1 under the adversarial objective, the judge loosening, and the harm of a "
                   "lenient anchor follow from what we built, and how close the gamed acceptance gets to 100% is "
                   "set by our item noise and effort budget. Re-ranking after a replacement is true by the set-up "
                   "(both rankings score the same items, so any other judge reorders them). In the program world "
                   "the frozen test suite holds a wrong test that a constant stub passes, and the lenient anchor "
                   "mislabels half-passing programs as good. Empirical here: RQGM against the strongest alternative "
                   "(in both worlds, beside a copy of RQGM whose anchor labels are shuffled) and SmolLM2's own "
                   "behaviour as a judge.")
    # world 2: HumanEval programs, sandboxed
    program_claims, pw = reproduce_programs.program_world(plan.programs, seed)
    rep.claims += program_claims
    rep.details["program_world"] = pw
    rep.setup += (f" World 2 (world_programs.py): {len(pw['tasks'])} HumanEval tasks × {plan.programs.seeds} seeds × "
                  f"budget {plan.programs.budget}; {pw['programs']} programs (canonical, AST mutants, constant "
                  f"stubs) and {pw['pool_tests']} generated tests/properties run in divelab.sandbox; truth = the "
                  "official hidden tests (every third held out as the anchor slice).")
    real_llm.add_to(rep, plan.real_llm, seed)  # SmolLM2-135M-Instruct as judge (full scale only)
    return rep


def _run_arms(plan: Plan, seeds: list[int]) -> dict[str, list[dict]]:
    """Every arm on every seed, in the controlled world."""
    results: dict[str, list[dict]] = {a: [] for a in ARMS}
    for arm, s in progress.track([(a, s) for a in ARMS for s in seeds], description="red-queen arms"):
        results[arm].append(run_arm(arm, s, plan.budget, plan.eval_items))
    return results


def _initial(plan: Plan, seeds: list[int]) -> dict[str, Any]:
    """The initial writer and judge of every seed's world, before any search: the writer's stats under the
    initial judge, and the judge's on the fresh items the final judges are measured on (paired by seed)."""
    worlds = [SyntheticWorld(seed=s) for s in seeds]
    ws = [w.writer_stats(w.initial_writer(), w.initial_judge()) for w in worlds]
    js = [w.judge_stats(w.initial_judge(), w.eval_items(plan.eval_items)) for w in worlds]
    return {"writer": ws[0], "judged_accept": np.array([x["judged_accept"] for x in ws]),
            "true_quality": np.array([x["true_quality"] for x in ws]),
            "best_true_quality": np.array([w.best_true_quality() for w in worlds]),
            "ratio": np.array([j["ratio"] for j in js]), "accuracy": np.array([j["accuracy"] for j in js]),
            "accept_rate": np.array([j["accept_rate"] for j in js])}


def _seeds(n: int) -> dict[str, Any]:
    """The replication unit of the controlled world's claims: independent runs, one per seed (each seed is
    one run of every arm, so comparisons are paired over seeds)."""
    return {"unit": "seeds (one run of every arm each)", "n": int(n), "clustered_by": ""}


def _claims_goodhart(R: dict[str, list[dict]], init: dict[str, Any]) -> list[Claim]:
    """Goodhart under the frozen biased judge: acceptance rises, true quality falls, agreement is low."""
    rep = _seeds(len(R["fixed"]))
    ja = _col(R["fixed"], "judged_accept")
    lo, hi = stats.mean_ci(ja)
    rise, rlo, rhi = stats.paired_diff_ci(ja, init["judged_accept"])
    out = [Claim(statement="frozen biased judge: judged acceptance of the final writer", paper_value="100%",
                 measured=float(ja.mean()), ci=(lo, hi), kind=Kind.PLANTED, source=SOURCE + " (ablation)",
                 baseline=f"initial writer: {init['judged_accept'].mean():.2f}", replication=rep,
                 ruling=verdicts.value(float(ja.mean()), paper=1.0, tol=0.1, tol_kind="abs", ci=(lo, hi)),
                 note=f"Rise over the initial writer under the same frozen judge, paired over seeds: {rise:+.3f} "
                      f"[{rlo:+.3f}, {rhi:+.3f}]. The search maximises this acceptance, so the rise is by "
                      "construction; how close it gets to 100% is set by our item noise and effort budget.")]
    tq = _col(R["fixed"], "true_quality")
    d, lo, hi = stats.paired_diff_ci(tq, init["true_quality"])
    out.append(Claim(statement="frozen biased judge: true quality of the final writer minus the initial writer's",
                     paper_value="anchor accuracy falls to 78.2% while acceptance is 100%", measured=d, ci=(lo, hi),
                     kind=Kind.PLANTED, source=SOURCE, baseline=f"initial writer: {init['true_quality'].mean():.2f}",
                     replication=rep,
                     ruling=verdicts.direction(d, (lo, hi), expected_sign=-1, why="the paper reports accuracy, not a "
                                               "quality drop; sizes are not comparable"),
                     note="True quality = P(an item of the writer truly deserves acceptance), exact."))
    ag = _col(R["fixed"], "agreement")
    lo, hi = stats.mean_ci(ag)
    out.append(Claim(statement="frozen biased judge: its agreement with the truth on the final writer's items",
                     paper_value="78.2% anchor accuracy", measured=float(ag.mean()), ci=(lo, hi), kind=Kind.PLANTED,
                     source=SOURCE, replication=rep,
                     ruling=verdicts.value(float(ag.mean()), paper=0.782, tol=0.1, tol_kind="abs", ci=(lo, hi)),
                     note="Our stand-in for the paper's anchor accuracy: how often the gamed judge is right on what "
                          "the writer now produces."))
    return out


def _claims_against_baselines(R: dict[str, list[dict]], init: dict[str, Any], seed: int) -> list[Claim]:
    """Full RQGM against the strongest baseline, and how much replacement re-ranks the archive."""
    tq = {a: _col(R[a], "true_quality") for a in ARMS}
    # one comparison against the strongest baseline measured (the trivial ones — no search, a random pick from
    # RQGM's own archive — the fixed judge, self-judging and the erasure ablation), so "erasure is load-bearing"
    # and "beats the baselines" are not counted twice
    base = {"starting writer (no search)": init["true_quality"],
            "random node of RQGM's archive": _col(R["rqgm"], "random_node_quality"),
            "fixed judge": tq["fixed"], "self-judging": tq["self_judge"], "replacement without erasure": tq["no_erasure"]}
    cmp = against_strongest(tq["rqgm"], base, seed=seed)
    c, clo, chi = stats.paired_diff_ci(tq["rqgm_shuffled_anchor"], base[cmp.strongest], seed=seed)
    ruling = verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, why="the paper's numbers are on other tasks",
                                control=verdicts.control("RQGM with the anchor's labels shuffled", c, (clo, chi)))
    # a ceiling: when the writer every arm starts from already has the highest true quality the effort budget
    # allows (our world's constants), no search can beat doing nothing, so the world cannot test the claim
    ceiling = float(init["best_true_quality"].min())
    searched = ""
    if cmp.strongest == "starting writer (no search)" and init["true_quality"].min() >= ceiling - 1e-9:
        alt = against_strongest(tq["rqgm"], {k: v for k, v in base.items() if k != cmp.strongest}, seed=seed)
        searched = (f"; against the strongest searching alternative ({alt.strongest}) RQGM's effect is "
                    f"{alt.effect:+.3f} [{alt.ci[0]:+.3f}, {alt.ci[1]:+.3f}]")
        ruling = verdicts.uninformative(
            f"ceiling: the starting writer already has the highest true quality the effort budget allows "
            f"({ceiling:.3f}, all effort on the quality features), so no search can beat doing nothing in this "
            f"world; every arm lost quality from it (RQGM by {-cmp.effect:.3f})")
    out = [Claim(statement="full RQGM minus the strongest baseline (no search, random pick from the archive, fixed "
                           "judge, self-judging, replacement without erasure): true quality of the final writer at "
                           "equal budget",
                 paper_value="higher quality at equal budget (71.7% vs 69.9% Polyglot; 1.78–1.86× writer acceptance); "
                             "without selective erasure stale evidence accumulates",
                 measured=cmp.effect, ci=cmp.ci, kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
                 replication=_seeds(len(tq["rqgm"])),
                 falsifier="RQGM's final writer no better in true quality than the strongest alternative run on the "
                           "same seeds and budget (interval reaching 0 or below) fails it; which arm wins is decided "
                           "by the search, the anchor's decisions and the final pick, not set by a constant (the "
                           "biased initial judge that all arms start from is ours).",
                 ruling=ruling,
                 note=f"paired over {len(tq['rqgm'])} seeds (each seed is one run of every arm); negative control: "
                      f"the same loop with the anchor's labels permuted, minus the same baseline{searched}.")]
    rh = np.array([r["spearman"] for r in R["rqgm"] if r["spearman"] is not None])
    if rh.size >= 2:
        lo, hi = stats.mean_ci(1 - rh)
        out.append(Claim(statement="replacement re-ranks the archive: 1 − Spearman ρ of node rankings before/after",
                         paper_value="ρ well below 1", measured=float(1 - rh.mean()), ci=(lo, hi),
                         kind=Kind.BY_CONSTRUCTION, source=SOURCE, replication=_seeds(int(rh.size)),
                         ruling=verdicts.direction(float(1 - rh.mean()), (lo, hi), why="the paper gives no number"),
                         note=f"mean ρ = {rh.mean():.2f} over {rh.size} seeds with a replacement. Both rankings score "
                              "the same items, so any judge other than the incumbent gives ρ < 1: the sign is true "
                              "by the set-up, and the size follows from our judge-mutation step."))
    return out


def _claims_adversarial_objective(R: dict[str, list[dict]], init: dict[str, Any]) -> list[Claim]:
    """The adversarial objective equalises acceptance between sources and keeps the judge accurate."""
    rep = _seeds(len(R["rqgm_adversarial"]))
    ra, rn = _col(R["rqgm_adversarial"], "judge", "ratio"), _col(R["rqgm"], "judge", "ratio")
    lo, hi = stats.mean_ci(ra)
    d, dlo, dhi = stats.paired_diff_ci(ra, init["ratio"])
    out = [Claim(statement="adversarial objective: AI/human acceptance ratio of the final judge",
                 paper_value="1.91× (baseline reviewer) → similar rates", measured=float(ra.mean()), ci=(lo, hi),
                 unit="×", kind=Kind.PLANTED, source=SOURCE, replication=rep,
                 baseline=f"initial judge: {init['ratio'].mean():.2f}×; RQGM without the objective: {rn.mean():.2f}×",
                 ruling=verdicts.value(float(ra.mean()), paper=1.0, tol=0.15, tol_kind="abs", ci=(lo, hi),
                                       control=verdicts.control("RQGM without the adversarial objective",
                                                                float(rn.mean()), stats.mean_ci(rn))),
                 note=f"Change from the initial judge, paired over seeds: {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]. The "
                      "initial judge's style weight was set so its ratio is near the paper's 1.9× (by "
                      "construction), and the objective's judge edits learn from matched pairs that differ only in "
                      "style.")]
    acc = _col(R["rqgm_adversarial"], "judge", "accuracy")
    lo, hi = stats.mean_ci(acc)
    out.append(Claim(statement="adversarial objective: ground-truth accuracy of the final judge",
                     paper_value="~80%", measured=float(acc.mean()), ci=(lo, hi), kind=Kind.PLANTED,
                     source=SOURCE, baseline=f"initial judge: {init['accuracy'].mean():.2f}", replication=rep,
                     ruling=verdicts.value(float(acc.mean()), paper=0.80, tol=0.05, tol_kind="abs", ci=(lo, hi))))
    return out


def _claims_less_strict(R: dict[str, list[dict]], init: dict[str, Any]) -> list[Claim]:
    """A grader gains by becoming less strict."""
    d, lo, hi = stats.paired_diff_ci(_col(R["rqgm"], "judge", "accept_rate"), init["accept_rate"])
    da, alo, ahi = stats.paired_diff_ci(_col(R["rqgm"], "judge", "accuracy"), init["accuracy"])
    return [Claim(statement="the replaced grader is less strict: acceptance rate change (final − initial judge)",
                  paper_value="biggest gain from becoming less strict (+9% accuracy)", measured=d, ci=(lo, hi),
                  kind=Kind.PLANTED, source=SOURCE, replication=_seeds(len(R["rqgm"])),
                  ruling=verdicts.direction(d, (lo, hi), expected_sign=1, why="the paper gives no strictness number"),
                  note=f"accuracy change {da:+.3f} [{alo:+.3f}, {ahi:+.3f}] (paper +9%). The initial judge is "
                       "over-strict by construction; what is empirical is that search loosens it.")]


def _claims_anchor(R: dict[str, list[dict]], seed: int) -> list[Claim]:
    """The anchor seam: what a lenient anchor does to the writer and to the judge."""
    tq_len, tq_cor = _col(R["rqgm_lenient_anchor"], "true_quality"), _col(R["rqgm"], "true_quality")
    d, lo, hi = stats.paired_diff_ci(tq_len, tq_cor)
    return [Claim(statement="lenient anchor minus correct anchor: true quality of the final writer",
                  paper_value="everything hinges on anchor quality (no number)", measured=d, ci=(lo, hi),
                  kind=Kind.PLANTED, source=SOURCE + " (limits)", baseline=f"correct anchor: {tq_cor.mean():.3f}",
                  replication=_seeds(len(tq_cor)),
                  ruling=verdicts.direction(d, (lo, hi), expected_sign=-1, why="the paper gives no number"),
                  note=f"lenient anchor labels items good from q > tau − {LENIENT_SHIFT}."),
            *lenient_anchor_judge_claims(R, seed)]


def _claims_bookkeeping(R: dict[str, list[dict]], plan: Plan) -> list[Claim]:
    """The algorithm's bookkeeping bounds, and what cannot be checked without frontier models."""
    n_cp = len(checkpoints(plan.budget))
    work = max((r["erased"] + r["rescored"]) / plan.budget for rs in R.values() for r in rs)
    return [Claim(statement="checkpoints within O(log B): count ≤ ⌊log₂(B/8)⌋ + 2", paper_value="O(log B)",
                  measured=float(n_cp), kind=Kind.CHECK, source=SOURCE,
                  ruling=verdicts.bound(n_cp, checkpoint_bound(plan.budget), exact=True), note=f"B = {plan.budget}"),
            Claim(statement="re-scoring work O(B): (erased + re-scored records) / B, worst run", paper_value="O(B)",
                  measured=work, kind=Kind.CHECK, source=SOURCE, ruling=verdicts.bound(work, 2.0, exact=True),
                  note="Each record is erased at most once and each re-score is one evaluation of the budget."),
            not_checkable("RQGM on Polyglot / paper writing / IMO grading",
                          "71.7% Polyglot; 1.78–1.86× writer acceptance; +9% grading accuracy",
                          "No frontier models offline. ChatJudge (any divelab.chat model) is implemented and tested "
                          "with the scripted model; SmolLM2 as a judge runs at full scale (real_llm.py); the "
                          "HumanEval program world (world 2, below) uses programmatic AST mutations, not an LLM "
                          "coder.", source=SOURCE)]
