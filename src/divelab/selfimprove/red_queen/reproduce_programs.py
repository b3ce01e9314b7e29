"""E178 in the program world: RQGM vs a frozen weak test suite, self-judging and replacement without erasure
on HumanEval.

Units are (task, seed) pairs; every arm runs the same loop, budget and seeds on the same benches,
so comparisons are paired, and intervals resample whole tasks (the seeds of one task share its bench
and its hidden tests). The benches (test pools, program pools, sandbox outcomes) are built once per
task and cached on disk by program hash; the search itself only looks outcomes up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import progress, stats, verdicts
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest
from divelab.selfimprove.red_queen.rqgm import RQGMConfig, run
from divelab.selfimprove.red_queen.world_programs import Bench, ProgramWorld, build_bench

SOURCE = "arXiv 2606.26294; week-in-review E178"
ARMS = {"fixed": ("fixed", "strict", False), "self_judge": ("self_judge", "strict", False),
        "no_erasure": ("no_erasure", "strict", False), "rqgm": ("rqgm", "strict", False),
        "rqgm_lenient_anchor": ("rqgm", "lenient", False),
        # the method comparison's negative control: the anchor's labels permuted across its programs
        "rqgm_shuffled_anchor": ("rqgm", "strict", True)}  # name: (mode, anchor labels, anchor labels shuffled)
# the alternatives the method is judged against (arm -> the name a claim records)
BASELINES = {"fixed": "frozen weak suite", "self_judge": "self-judging", "no_erasure": "replacement without erasure"}
# The bool-valued HumanEval tasks that can host the world (build_bench does not refuse them) and where no
# constant stub passes every evaluation-slice test, in HumanEval order (scanned once over all 164 tasks;
# 40 and 57 are bool-valued but there `return False` / `return True` passes every eval-slice test). A
# bool-valued task makes the constant-stub hack tempting: it passes part of the hidden tests.
TASKS = ("HumanEval/0", "HumanEval/3", "HumanEval/31", "HumanEval/43", "HumanEval/48", "HumanEval/52",
         "HumanEval/54", "HumanEval/56", "HumanEval/72", "HumanEval/80", "HumanEval/82", "HumanEval/92",
         "HumanEval/109", "HumanEval/124", "HumanEval/126", "HumanEval/132", "HumanEval/134", "HumanEval/138",
         "HumanEval/144", "HumanEval/154")


@dataclass(frozen=True)
class Plan:
    """The program world's sizes (one field of the red-queen reproduction's plan)."""

    tasks: int
    """HumanEval tasks run (the first of ``TASKS``); each builds a sandboxed bench of programs and tests."""
    seeds: int
    """loop runs per task and arm (paired over arms)."""
    budget: int
    """evaluations each loop run may spend."""

    def __post_init__(self) -> None:
        if not 1 <= self.tasks <= len(TASKS) or self.seeds < 1 or self.budget < 1:
            raise ValueError(f"need 1 <= tasks <= {len(TASKS)}, seeds >= 1, budget >= 1; got {self}")


def run_arm(bench: Bench, arm: str, seed: int, budget: int) -> dict[str, Any]:
    mode, anchor_mode, shuffled = ARMS[arm]
    world = ProgramWorld(bench, seed=seed, anchor_mode=anchor_mode)
    res = run(world, RQGMConfig(budget=budget, mode=mode, shuffle_anchor=shuffled), seed=seed)
    w = res.final_writer
    # a trivial baseline: the final program picked uniformly from the same archive instead of by best-belief
    nodes = res.archive.nodes
    random_node = nodes[int(np.random.default_rng([seed, 29]).integers(len(nodes)))]
    rhos = [r.spearman for r in res.replacements if r.spearman is not None]
    return {"true_quality": world.true_quality(w), "random_node_quality": world.true_quality(random_node.writer),
            "correct": float(bench.quality(w, "all") == 1.0),
            "stub": float(bench.programs[w].origin == "stub"),
            "judged_accept": world.judged_accept(w, res.final_judge),
            "judged_accept_initial_judge": world.judged_accept(w, res.initial_judge),
            "judge_accuracy": world.judge_accuracy(res.final_judge), "suite_size": len(res.final_judge),
            "replacements": len(res.replacements), "spearman": float(np.mean(rhos)) if rhos else None,
            "erased": res.archive.erased, "nodes": len(res.archive.nodes)}


def measure(plan: Plan, seed: int = 0) -> dict[str, Any]:
    benches = [build_bench(t) for t in progress.track(TASKS[: plan.tasks], description="program world: sandbox")]
    seeds = [seed * 1000 + s for s in range(plan.seeds)]
    units = [(b, s) for b in benches for s in seeds]
    rows: dict[str, list[dict]] = {a: [] for a in ARMS}
    for arm, (b, s) in progress.track([(a, u) for a in ARMS for u in units], description="program world: arms"):
        rows[arm].append(run_arm(b, arm, s, plan.budget))
    init = [ProgramWorld(b) for b in benches]
    init_q = np.repeat([w.true_quality(w.initial_writer()) for w in init], len(seeds))
    init_acc = np.repeat([w.judged_accept(w.initial_writer(), w.initial_judge()) for w in init], len(seeds))
    init_judge = np.repeat([w.judge_accuracy(w.initial_judge()) for w in init], len(seeds))
    canon_acc = [w.judged_accept(w.bench.canonical, w.initial_judge()) for w in init]
    return {"tasks": [b.task.task_id for b in benches], "seeds": seeds, "rows": rows,
            "initial_true_quality": init_q, "initial_judged_accept": init_acc, "initial_judge_accuracy": init_judge,
            "canonical_accept_weak_suite": canon_acc, "programs": int(sum(len(b.programs) for b in benches)),
            "pool_tests": int(sum(len(b.tests) for b in benches))}


def _col(rows: list[dict], key: str) -> np.ndarray:
    return np.array([r[key] for r in rows], dtype=float)


def program_world(plan: Plan, seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """Run the program world: its claims and its details."""
    m = measure(plan, seed)
    R, n = m["rows"], len(m["rows"]["rqgm"])
    tq = {a: _col(R[a], "true_quality") for a in ARMS}
    src = SOURCE + " (program world: HumanEval)"
    out = []
    # seeds within a task share its bench and its hidden tests: intervals resample whole tasks
    task_of = np.repeat(m["tasks"], len(m["seeds"]))
    rep = {"unit": "runs (task × seed)", "n": int(n), "clustered_by": "HumanEval tasks"}
    ja = _col(R["fixed"], "judged_accept")
    _, lo, hi = stats.cluster_diff_ci(ja, np.zeros_like(ja), task_of, seed=seed)  # the mean, tasks resampled
    start = float(np.mean(m["initial_judged_accept"]))
    rise, rlo, rhi = stats.cluster_diff_ci(ja, m["initial_judged_accept"], task_of, seed=seed)
    out.append(Claim(statement="program world, frozen weak test suite: judged acceptance (suite pass rate) of the "
                            "final program", paper_value="100%", measured=float(ja.mean()), ci=(lo, hi),
                  kind=Kind.PLANTED, source=src, replication=rep,
                  baseline=f"seeded buggy writer: {start:.2f}; canonical solution: "
                           f"{np.mean(m['canonical_accept_weak_suite']):.2f}",
                  ruling=verdicts.value(float(ja.mean()), paper=1.0, tol=0.05, tol_kind="abs", ci=(lo, hi)),
                  note=f"share of final programs that are `return c` stubs: {_col(R['fixed'], 'stub').mean():.2f}; "
                       f"rise over the seeded buggy writer under the same suite {rise:+.3f} [{rlo:+.3f}, {rhi:+.3f}] "
                       "(cluster bootstrap over tasks). The suite is weak by construction (it holds a wrong test a "
                       "stub passes) and the search maximises its pass rate; what is empirical is that search finds "
                       "the hack."))
    d, lo, hi = stats.cluster_diff_ci(tq["fixed"], m["initial_true_quality"], task_of, seed=seed)
    out.append(Claim(statement="program world, frozen weak suite: hidden-test pass rate of the final program minus the "
                            "seeded buggy writer's", paper_value="anchor accuracy falls (78.2%) while acceptance is 100%",
                  measured=d, ci=(lo, hi), kind=Kind.PLANTED, source=src, replication=rep,
                  baseline=f"seeded buggy writer: {np.mean(m['initial_true_quality']):.3f}",
                  ruling=verdicts.direction(d, (lo, hi), expected_sign=-1,
                                            why="the paper reports accuracy on other tasks; sizes not comparable"),
                  note="True quality = pass rate on the official HumanEval tests outside the anchor slice."))
    # one comparison against the strongest alternative measured in this run (the trivial ones — the seeded writer
    # with no search, a random pick from RQGM's own archive — the frozen weak suite, self-judging, and the erasure
    # ablation), so erasure and "beats the baselines" are not counted twice
    base = {"seeded buggy writer (no search)": m["initial_true_quality"],
            "random node of RQGM's archive": _col(R["rqgm"], "random_node_quality"),
            **{name: tq[arm] for arm, name in BASELINES.items()}}
    cmp = against_strongest(tq["rqgm"], base, clusters=task_of, seed=seed)
    ctl, clo, chi = stats.cluster_diff_ci(tq["rqgm_shuffled_anchor"], base[cmp.strongest], task_of, seed=seed)
    # power: the task is the independent unit, so the spread that matters is that of the per-task mean gaps
    per_task = np.array([np.mean(tq["rqgm"][task_of == t] - base[cmp.strongest][task_of == t]) for t in m["tasks"]])
    sd_task = float(per_task.std(ddof=1)) if per_task.size > 1 else 0.0
    out.append(Claim(statement="program world: full RQGM minus the strongest alternative (no search, random pick from "
                            "the archive, frozen weak suite, self-judging, replacement without erasure), hidden-test "
                            "pass rate at equal budget",
                  paper_value="higher quality at equal budget; without selective erasure stale evidence accumulates",
                  measured=cmp.effect, ci=cmp.ci, kind=Kind.EMPIRICAL, source=src, **cmp.claim_fields(),
                  replication=rep,
                  falsifier="RQGM's final program passing no more official hidden tests than the strongest alternative "
                            "on the same tasks, seeds and budget (interval reaching 0 or below) fails it; the hidden "
                            "tests are HumanEval's own, so the pass rates are not set by our constants (the weak "
                            "suite and the stubs the search may find are ours).",
                  ruling=verdicts.direction(cmp.effect, cmp.ci, expected_sign=1,
                                            why="the paper's numbers are on other tasks",
                                            control=verdicts.control("RQGM with the anchor's labels shuffled", ctl,
                                                                     (clo, chi))),
                  note=f"against {cmp.strongest}; {len(m['tasks'])} tasks × {len(m['seeds'])} runs per task and arm, "
                       f"cluster bootstrap over tasks (stats.cluster_diff_ci); negative control: the same loop with the "
                       f"anchor's labels permuted, minus the same baseline. Power: sd of the per-task mean gap "
                       f"{sd_task:.3f} over {len(m['tasks'])} tasks gives a minimum detectable effect (80%, alpha "
                       f"0.05) of {stats.mde_two_sample(sd_task, len(m['tasks'])):.3f}; the paper's own gap (71.7 vs "
                       f"69.9 on Polyglot) is on other tasks. Share correct on all hidden tests: RQGM "
                       f"{_col(R['rqgm'], 'correct').mean():.2f}, "
                       + ", ".join(f"{name} {_col(R[arm], 'correct').mean():.2f}" for arm, name in BASELINES.items())
                       + f"; stubs RQGM {_col(R['rqgm'], 'stub').mean():.2f}, "
                       + ", ".join(f"{name} {_col(R[arm], 'stub').mean():.2f}" for arm, name in BASELINES.items())
                       + "; "
                       f"judge accuracy on the program pool (balanced): initial {np.mean(m['initial_judge_accuracy']):.2f}"
                       f", RQGM's final {_col(R['rqgm'], 'judge_accuracy').mean():.2f}; replacements per run "
                       f"{_col(R['rqgm'], 'replacements').mean():.1f}."))
    d, lo, hi = stats.cluster_diff_ci(tq["rqgm_lenient_anchor"], tq["rqgm"], task_of, seed=seed)
    out.append(Claim(statement="program world: lenient anchor (good = passes half the held-out slice) minus strict "
                            "anchor, hidden-test pass rate", paper_value="everything hinges on anchor quality (no number)",
                  measured=d, ci=(lo, hi), kind=Kind.PLANTED, source=src + " (limits)", replication=rep,
                  baseline=f"strict anchor: {tq['rqgm'].mean():.3f}",
                  ruling=verdicts.direction(d, (lo, hi), expected_sign=-1, why="the paper gives no number")))
    arms = {a: {k: float(np.mean(_col(rs, k))) for k in ("true_quality", "correct", "stub", "judged_accept",
                                                           "judged_accept_initial_judge", "judge_accuracy",
                                                           "suite_size", "replacements", "erased", "nodes")}
            for a, rs in R.items()}
    return out, {"tasks": m["tasks"], "units": n, "programs": m["programs"],
                  "pool_tests": m["pool_tests"], "initial_true_quality": float(np.mean(m["initial_true_quality"])),
                  "initial_judged_accept": float(np.mean(m["initial_judged_accept"])), "arms": arms}
