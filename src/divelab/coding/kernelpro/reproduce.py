"""KernelPro (E177) on the CPU backend: real gcc kernels, objdump + callgrind micro-tools, MCTS vs baselines.

Search rewards use callgrind's estimated cycles (``CEst``, deterministic on a shared machine); the
wall-clock speedups of the searched kernels come from interleaved timing rounds (every arm once per
round). Every comparison is judged against the strongest baseline measured in the same run, trivial
ones included: the unmodified kernel (the naive program at ``-O1``, our "eager"), the first candidate
(the reference plus the diagnoses' top edit), random search at the same budget, and the strong
compiler builds (``-O3 -march=native``, a one-shot ``-O3 -mavx2 -ffast-math`` build, NumPy/BLAS).
Each positive claim carries a negative control run beside it: the search with a sham reward, the
memory crediting the wrong edits, the proposer fed sham diagnoses. Every search seed's best kernel
is timed (no best-of-seeds); intervals resample whole problems, and only TEST problems are measured:
the MCTS constants were set on the development problems (``problems.DEV_PROBLEMS``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.coding.kernelpro import backend
from divelab.coding.kernelpro.evaluate import Candidate, Evaluator
from divelab.coding.kernelpro.problems import DEV_PROBLEMS, PROBLEMS, TEST_PROBLEMS, Problem
from divelab.coding.kernelpro.program import Config, apply_edit, edit_names
from divelab.coding.kernelpro.proposer import NoDiagnoses, RandomProposer, RuleProposer, ShamDiagnoses
from divelab.coding.kernelpro.roofline import Roofline, measure_roofline
from divelab.coding.kernelpro.search import MCTS, Greedy, RandomSearch
from divelab.comparisons import against_strongest
from divelab.progress import track
from divelab.stages import stage

SOURCE = "arXiv 2606.26453; week-in-review E177"
# what only the review's discussion of the paper reports (not a number from the paper's tables)
EPISODE = "week-in-review E177"
# the strong compiler baseline: the same naive kernel, every optimisation and ISA extension of this CPU
NATIVE_BUILD = Config(opt="-O3", native=True)
# the strongest simple alternative to a search over edits: the naive program with every edit flag at once
COMPILER_ONLY = Config(opt="-O3", avx2=True, restrict=True, fast_math=True)
# wall-clock timing rounds: every arm is timed once per round, so load drifts hit all arms alike
ROUNDS = 7
EAGER, NATIVE, NUMPY, ONE_SHOT = ("eager (naive program at -O1)", "same kernel at -O3 -march=native", "NumPy/BLAS",
                                  "one-shot -O3 -mavx2 -ffast-math build")
FIRST = "first candidate (reference + the diagnoses' top edit)"
RANDOM_KERNEL = "random search's kernel (same budget)"
SHAM_KERNEL = "MCTS with a sham reward (control)"
BASELINES = (NATIVE, NUMPY, ONE_SHOT, EAGER, FIRST, RANDOM_KERNEL)
# averaged timing arm -> the search method whose every seed's best kernel is timed
SEED_AVERAGED = {"mcts": "mcts", RANDOM_KERNEL: "random", SHAM_KERNEL: "mcts-shamreward"}
# an interval over problems needs this many problems as units; fewer makes the claim uninformative
MIN_PROBLEMS = 8
# the paper's KernelBench geomeans over PyTorch eager (GPU), Level 1 and Level 2: the weak baseline's multipliers
PAPER_LEVEL = {1: 2.42, 2: 4.69}
# the paper's one number against expert-tuned code: its MoE kernel over VeOmni's hand-tuned Triton kernels
PAPER_OVER_EXPERT = 1.23
# search methods compared at the plan's budget; the claims read them by these names
METHODS = ("mcts", "mcts-nomem", "mcts-shammem", "mcts-shamreward", "greedy", "random", "greedy-noprofile")
# the "diagnoses vs no profiling" ablation: greedy search with each proposer input, at the root budget
ROOT_INPUTS = ("diagnoses", "no profiling (fixed edit order)", "random edit order", "sham diagnoses")


def seed_arm(s: int, method: str = "mcts") -> str:
    """The timing arm of search seed ``s``'s best kernel found by ``method``."""
    return f"{method} seed {s}"


def root_budget(problem: Problem) -> int:
    """The diagnoses claim's budget: the number of single safe edits applicable to the reference kernel.

    Chosen from the search space, not from any outcome: the budget counts the reference itself, so a search
    sees the reference and one edited kernel fewer than the reference's neighbourhood holds. No order can try
    every first step, and the order decides which kernels are reached. With a budget that covers the applicable
    edits, greedy search reaches the same kernel from any order and the comparison ties exactly."""
    return sum(apply_edit(Config(), e) is not None for e in edit_names(problem.capabilities) if e != "drop_tail")


def first_config(ref: Candidate, problem: Problem) -> Config:
    """The first candidate: the reference plus the top edit the rule proposer ranks from its diagnoses (no unsafe
    edit); the trivial "take the first suggestion" baseline."""
    top = RuleProposer().propose(ref.config, ref.diagnoses, problem.capabilities, random.Random(0))
    return apply_edit(ref.config, top[0]) if top else ref.config


@dataclass(frozen=True)
class Plan:
    problems: tuple[str, ...]
    """KernelBench-shaped CPU problems searched and timed: the test problems (``problems.TEST_PROBLEMS``),
    never the development ones the MCTS constants were set on."""
    budget: int
    """distinct kernels each search may compile, check and profile."""
    seeds: int
    """search runs per method and problem (seeds ``seed``, ``seed+1``, ...)."""
    risky: float = 0.2
    """probability that the rule proposer puts its unsafe edit (drop the remainder loop) first."""


PLANS = {
    "smoke": Plan(("rmsnorm",), budget=2, seeds=1),
    "quick": Plan(TEST_PROBLEMS, budget=8, seeds=2),
    "full": Plan(TEST_PROBLEMS, budget=30, seeds=5),
}

# Stage weights (divelab.stages), rough shares of a full run's time: one (problem, seed) search of every method
# (each distinct kernel compiled, checked, disassembled and run under callgrind: the bulk), the wall-clock timing
# of one problem's arms, the roofline (scaled from smoke's stage times by the budget).
W_SEARCH_JOB, W_TIMING, W_ROOFLINE = 1.0, 0.05, 0.02
STAGE_WEIGHT = (len(PLANS["full"].problems) * (PLANS["full"].seeds * W_SEARCH_JOB + W_TIMING) + W_ROOFLINE)


@dataclass
class Searches:
    """Every search run: ``results[method][(problem, seed)]``, and one evaluator (with its memo) per problem."""

    results: dict[str, dict[tuple[str, int], object]]
    evaluators: dict[str, Evaluator]
    jobs: list[tuple[str, int]]
    seeds: list[int]
    firsts: dict[str, Candidate] = field(default_factory=dict)

    def log_speedups(self, method: str) -> np.ndarray:
        """Log callgrind-cost speedup of each (problem, seed) run of ``method``, in ``jobs`` order."""
        return np.log(np.array([self.results[method][j].speedup for j in self.jobs]))

    def first_log_speedups(self) -> np.ndarray:
        """Log callgrind-cost speedup of each problem's first candidate, per (problem, seed) run; a first candidate
        behind the correctness wall leaves the reference (0)."""
        out = []
        for p, s in self.jobs:
            c, ref = self.firsts[p], self.results["mcts"][(p, s)].ref
            out.append(math.log(ref.cost / c.cost) if c.ok else 0.0)
        return np.array(out)

    def replication(self) -> dict:
        return {"unit": "search runs (test problem x search seed)", "n": len(self.jobs), "clustered_by": "problem"}

    def anytime_log_speedups(self, method: str, budget: int) -> np.ndarray:
        """Mean over evaluations 1..``budget`` of each run's log best-so-far speedup (the area under its search
        curve; a run that stopped early keeps its last value), in ``jobs`` order."""
        out = []
        for j in self.jobs:
            h = self.results[method][j].history
            out.append(float(np.mean(np.log((h + [h[-1]] * budget)[:budget]))))
        return np.array(out)

    @property
    def problem_of(self) -> list[str]:
        return [p for p, _ in self.jobs]


def interleaved_times(arms: dict[str, object], rounds: int = ROUNDS, min_time: float = 5e-3) -> dict[str, np.ndarray]:
    """Seconds per call of each zero-argument callable, one sample per arm per round, arms interleaved."""
    if rounds < 5:
        raise ValueError(f"a timing claim needs at least 5 interleaved rounds, got {rounds}")
    out: dict[str, list[float]] = {name: [] for name in arms}
    for r in range(rounds):
        for name, fn in arms.items():
            out[name].append(backend.time_call(fn, warmup=2 if r == 0 else 1, repeats=1, min_time=min_time).median_s)
    return {name: np.array(v) for name, v in out.items()}


def _figure(histories: dict[str, list[list[float]]], budget: int) -> Figure:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name, hs in histories.items():
        arr = np.array([(h + [h[-1]] * budget)[:budget] for h in hs])
        ax.plot(np.arange(1, budget + 1), np.exp(np.log(arr).mean(axis=0)), label=name)
    ax.set_xlabel("kernels evaluated (compile + check + profile)")
    ax.set_ylabel("geomean speedup (callgrind CEst)")
    ax.legend()
    return Figure.from_matplotlib(fig, "search_curves", "Best speedup so far vs search budget, geomean over "
                                  "problems and seeds (deterministic callgrind cost).")


def run(plan: Plan, seed: int) -> Reproduction:
    rep = Reproduction("kernelpro", "KernelPro: micro-profiling tools and MCTS for kernels (E177), CPU backend",
                       "", seed)
    backend.find_compiler()
    if not backend.have_valgrind():
        raise RuntimeError("the KernelPro reproduction needs valgrind (callgrind) for deterministic costs; "
                           "install it with `apt-get install -y valgrind`")
    # a stage of its own, so a resumed run's evaluators classify kernels against the same measured roofline
    roof = stage("measure the roofline", measure_roofline, weight=W_ROOFLINE)
    rep.details["roofline"] = {"peak_GFLOPs": roof.peak_flops / 1e9, "bandwidth_GBs": roof.bandwidth / 1e9,
                               "ridge_flop_per_byte": roof.ridge}
    searches = _search(plan, seed, roof)
    rep.details["searches"] = {m: {f"{p}/seed{s}": {"speedup_cest": r.speedup, "best": r.best.config.short(),
                                                    "evaluations": r.evaluations}
                                   for (p, s), r in searches.results[m].items()} for m in searches.results}
    rep.details["first_candidate"] = {p: {"config": c.config.short(), "correct": c.ok}
                                      for p, c in searches.firsts.items()}
    rep.details["distinct_kernels_evaluated"] = {p: e.evaluations for p, e in searches.evaluators.items()}
    walls, logs = stage(f"time every arm on {len(plan.problems)} problems ({ROUNDS} rounds)",
                        lambda: _wall_clock(plan, searches), weight=W_TIMING * len(plan.problems))
    rep.details["wall_clock"] = walls
    rep.details["problem_split"] = {"development": list(DEV_PROBLEMS), "test": list(TEST_PROBLEMS),
                                    "measured": list(plan.problems)}

    claims, rep.details["wall_clock_over_eager"] = _claims_wall_clock(logs, plan, seed, searches.seeds)
    rep.claims += claims
    rep.claims += _claims_mcts_vs_other_searches(searches, plan, seed)
    rep.claims += _claims_search_memory(searches, seed)
    claims, rep.details["diagnoses_over_the_whole_budget"] = _claims_diagnoses_as_input(searches, seed, plan.budget)
    rep.claims += claims
    claims, rep.details["scalar_fallback"] = _claims_scalar_fallback(searches)
    rep.claims += claims
    rep.claims += _claims_correctness_wall(searches, plan)
    rep.claims += _claims_not_checkable_here()

    rep.figures.append(_figure({m: [searches.results[m][j].history for j in searches.jobs]
                                for m in ("mcts", "greedy", "random")}, plan.budget))
    rep.setup = (f"{len(plan.problems)} KernelBench-shaped CPU test problems ({', '.join(plan.problems)}; the MCTS "
                 f"constants were set on the development problems {', '.join(DEV_PROBLEMS)}), each a C "
                 "kernel program + transformations compiled by gcc, called via ctypes, checked against a float64 "
                 f"NumPy reference; every search node is compiled, checked, disassembled (objdump) and run under "
                 f"callgrind; {plan.seeds} seed(s), budget {plan.budget} distinct kernels per search (the diagnoses "
                 f"ablation: the number of edits applicable to the reference, per problem); machine "
                 f"roofline measured: {roof.peak_flops / 1e9:.1f} GFLOP/s, {roof.bandwidth / 1e9:.1f} GB/s.")
    rep.planted = (f"The rule proposer puts an unsafe edit (dropping the remainder loop, wrong because no size is a "
                   f"multiple of 8) first with probability {plan.risky}, so fast-but-wrong candidates are injected "
                   "by us and then caught by the correctness check.")
    return rep


def search_methods(risky: float) -> tuple[dict, dict]:
    """Search factories (seed -> search): the methods run at the plan's budget, and the diagnoses ablation's four
    greedy searches (run at the root budget), keyed as in ``METHODS`` and ``ROOT_INPUTS``."""
    methods = {
        "mcts": lambda s: MCTS(RuleProposer(risky), seed=s),
        "mcts-nomem": lambda s: MCTS(RuleProposer(risky), seed=s, memory=False),
        "mcts-shammem": lambda s: MCTS(RuleProposer(risky), seed=s, sham_memory=True),
        "mcts-shamreward": lambda s: MCTS(RuleProposer(risky), seed=s, sham_reward=True),
        "greedy": lambda s: Greedy(RuleProposer(risky), seed=s),
        "random": lambda s: RandomSearch(RandomProposer(), seed=s),
        "greedy-noprofile": lambda s: Greedy(NoDiagnoses(RuleProposer(risky)), seed=s),
    }
    root = dict(zip(ROOT_INPUTS, (
        lambda s: Greedy(RuleProposer(risky), seed=s),
        lambda s: Greedy(NoDiagnoses(RuleProposer(risky)), seed=s),
        lambda s: Greedy(RandomProposer(risky), seed=s),
        lambda s: Greedy(ShamDiagnoses(RuleProposer(risky), seed=s), seed=s),
    ), strict=True))
    assert tuple(methods) == METHODS
    return methods, root


def _search(plan: Plan, seed: int, roof: Roofline) -> Searches:
    """Every method searches every (problem, seed) with the same budget; the diagnoses ablation's four greedy
    searches use the problem's root budget. Evaluators are shared per problem."""
    seeds = [seed + i for i in range(plan.seeds)]
    methods, root = search_methods(plan.risky)
    results: dict[str, dict[tuple[str, int], object]] = {m: {} for m in (*METHODS, *ROOT_INPUTS)}
    evaluators: dict[str, Evaluator] = {}
    jobs = [(p, s) for p in plan.problems for s in seeds]
    for p, s in track(jobs, "KernelPro: searching"):
        ev = evaluators.setdefault(p, Evaluator(PROBLEMS[p], roofline=roof))
        rb = min(root_budget(PROBLEMS[p]), plan.budget)
        # one stage per (problem, seed); the problem's evaluator memo (shared by later seeds) travels with it, so
        # a resumed run's later searches see the same memo (the evaluator itself holds callables: no pickle)
        found, ev.memo, ev.order = stage(
            f"search {p} seed {s}: {len(METHODS)} methods x {plan.budget} kernels, {len(ROOT_INPUTS)} x {rb}",
            lambda ev=ev, s=s, rb=rb: search_job(methods, root, ev, s, plan.budget, rb), weight=W_SEARCH_JOB)
        for m, r in found.items():
            results[m][(p, s)] = r
    firsts = {}
    for p, ev in evaluators.items():
        ref = results["mcts"][(p, seeds[0])].ref
        firsts[p] = ev.evaluate(first_config(ref, PROBLEMS[p]))
    return Searches(results, evaluators, jobs, seeds, firsts)


def search_job(methods: dict, root: dict, ev: Evaluator, s: int, budget: int, rb: int) -> tuple:
    """Every method's search of one (problem, seed): (results per method, the evaluator's memo and order after)."""
    found = {m: f(s).search(ev, budget) for m, f in methods.items()}
    found.update({m: f(s).search(ev, rb) for m, f in root.items()})
    return found, ev.memo, ev.order


def _wall_clock(plan: Plan, searches: Searches) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """Every seed's MCTS kernel vs every baseline (and the sham-reward control), in interleaved timing rounds.

    Returns the per-problem record for ``details`` and, per problem and arm, the log speedup over the
    eager reference in each round (paired: the arms of a round ran back to back)."""
    walls, logs = {}, {}
    for p in track(plan.problems, "KernelPro: timing"):
        prob = PROBLEMS[p]
        bests = {seed_arm(s, m): searches.results[m][(p, s)].best for m in SEED_AVERAGED.values()
                 for s in searches.seeds}
        ref = searches.results["mcts"][(p, searches.seeds[0])].ref
        first = searches.firsts[p] if searches.firsts[p].ok else ref
        xs = prob.make_inputs(1)
        out = np.zeros(prob.output, dtype=np.float32)
        calls = {arm: backend.load(backend.build(prob, c.config)) for arm, c in bests.items()}
        calls[EAGER] = backend.load(backend.build(prob, ref.config))
        calls[FIRST] = backend.load(backend.build(prob, first.config))
        calls[ONE_SHOT] = backend.load(backend.build(prob, COMPILER_ONLY))
        calls[NATIVE] = backend.load(backend.build(prob, NATIVE_BUILD))
        # a baseline must be right too: the native build keeps IEEE semantics, and the wall confirms it
        wall = backend.verify(prob, NATIVE_BUILD, calls[NATIVE])
        if not wall.ok:
            raise RuntimeError(f"{p}: the -O3 -march=native baseline fails the correctness check: {wall.failed[:5]}")
        arms = {name: (lambda f=f, xs=xs, out=out: f(*xs, out)) for name, f in calls.items()}
        arms[NUMPY] = lambda xs=xs, prob=prob: prob.baseline(xs)
        t = interleaved_times(arms)
        logs[p] = {name: np.log(t[EAGER] / t[name]) for name in t}
        walls[p] = {"level": prob.level, "rounds": ROUNDS, "first_candidate": first.config.short(),
                    "best_per_seed": {arm: c.config.short() for arm, c in bests.items()},
                    "speedup_cest_per_seed": {arm: ref.cost / c.cost for arm, c in bests.items()},
                    **{f"t_{name}_us": float(np.median(v) * 1e6) for name, v in t.items()},
                    **{f"log_speedup_over_eager_{name}": float(np.mean(v)) for name, v in logs[p].items()}}
    return walls, logs


def seed_logs(logs: dict[str, dict[str, np.ndarray]], seeds: list[int]) -> dict[str, dict[str, np.ndarray]]:
    """Adds the seed-averaged arms ("mcts", random search's kernel, the sham control): per round, the mean over
    search seeds of the seeds' log speedups (no best-of), for each method whose seed arms were timed."""
    out = {}
    for p, arms in logs.items():
        out[p] = dict(arms)
        for name, method in SEED_AVERAGED.items():
            if all(seed_arm(s, method) in arms for s in seeds):
                out[p][name] = np.mean([arms[seed_arm(s, method)] for s in seeds], axis=0)
    return out


def _stack(logs: dict[str, dict[str, np.ndarray]], arm: str) -> np.ndarray:
    return np.concatenate([logs[p][arm] for p in logs])


def wall_comparison(logs: dict[str, dict[str, np.ndarray]], seed: int = 0, baselines: tuple[str, ...] = BASELINES,
                    method: str = "mcts"):
    """An arm (default: the seed-averaged MCTS kernel) against the strongest of ``baselines``, from per-round
    log speedups over eager.

    ``logs[problem][arm]`` holds one value per timing round; rounds of one problem are paired across arms
    and clustered by problem, so the interval reflects problem-to-problem spread, not only timing noise.
    """
    base = {name: _stack(logs, name) for name in baselines}
    clusters = [p for p in logs for _ in logs[p][method]]
    return against_strongest(_stack(logs, method), base, clusters=clusters, seed=seed)


def wall_control(logs: dict[str, dict[str, np.ndarray]], against: str, seed: int = 0) -> dict:
    """The headline's negative control: the sham-reward MCTS kernel over the same baseline, same units."""
    clusters = [p for p in logs for _ in logs[p][SHAM_KERNEL]]
    eff, lo, hi = stats.cluster_diff_ci(_stack(logs, SHAM_KERNEL), _stack(logs, against), clusters, seed=seed)
    return verdicts.control("the search's reward replaced by noise (sham-reward MCTS kernel over the same "
                            "baseline)", eff, (lo, hi))


def _paper_band(problems: list[str]) -> tuple[float, float]:
    """The paper's per-level log geomeans over PyTorch eager, for the levels among ``problems``."""
    levels = sorted({PROBLEMS[p].level for p in problems})
    vals = [math.log(PAPER_LEVEL[lv]) for lv in levels]
    return (min(vals), max(vals))


def _few_problems(n: int) -> str:
    """Why a claim over ``n`` test problems cannot be judged ('' when it can)."""
    return (f"{n} test problem(s): an interval over problems needs at least {MIN_PROBLEMS} problems as units"
            if n < MIN_PROBLEMS else "")


def _claims_wall_clock(logs: dict[str, dict[str, np.ndarray]], plan: Plan, seed: int,
                       seeds: list[int]) -> tuple[list[Claim], dict]:
    """The seed-averaged MCTS kernel's wall-clock speedup over the strongest baseline, over the test problems;
    and, for ``details`` (not a claim: eager is the weak baseline), its multiplier over eager beside the paper's."""
    ps = list(plan.problems)
    logs = seed_logs({p: logs[p] for p in ps}, seeds)
    levels = ", ".join(f"{sum(PROBLEMS[p].level == lv for p in ps)} at Level {lv}" for lv in (1, 2))
    few = _few_problems(len(ps))
    common = (f"{ROUNDS} interleaved timing rounds per problem (every arm once per round), interval resamples "
              f"whole test problems; every search seed's best kernel (chosen by callgrind cost) is timed and the "
              f"seeds are averaged, never the best of them; the MCTS constants were set on the development "
              f"problems ({', '.join(DEV_PROBLEMS)}), which are not measured here")
    cmp = wall_comparison(logs, seed, BASELINES)
    per_seed = [float(np.mean(np.concatenate([logs[p][seed_arm(s)] - logs[p][cmp.strongest] for p in ps])))
                for s in seeds]
    lo, hi = stats.mean_ci(per_seed)
    seed_note = (f"per search seed (mean over problems): "
                 f"{', '.join(f'seed {s} {v:+.3g}' for s, v in zip(seeds, per_seed, strict=True))}; "
                 f"over seeds: mean {np.mean(per_seed):+.3g} [{lo:+.3g}, {hi:+.3g}] (t interval)")
    ctl = wall_control(logs, cmp.strongest, seed)
    ruling = (verdicts.uninformative(few) if few else
              verdicts.direction(cmp.effect, cmp.ci, paper=math.log(PAPER_OVER_EXPERT), tol=0.5,
                                 training_runs=len(seeds), control=ctl))
    means = {b["name"]: b["value"] for b in cmp.baselines}
    method_mean = float(np.mean(_stack(logs, "mcts")))
    also = "; ".join(f"{math.exp(method_mean - v):.2f}x over {b}" for b, v in means.items() if b != cmp.strongest)
    claim = Claim(
        statement=f"KernelBench-shaped test problems ({len(ps)}: {levels}): the MCTS kernel's speedup over the "
                  "strongest baseline measured (the same kernel at -O3 -march=native, NumPy/BLAS, a one-shot -O3 "
                  "-ffast-math build, the unmodified kernel at -O1, the first candidate, random search's kernel), "
                  f"mean over {len(seeds)} search seed(s), wall clock, log scale",
        paper_value=f"{PAPER_OVER_EXPERT}x over hand-tuned Triton (one MoE kernel: the paper's only number against "
                    "expert-tuned code); its 2.42x / 4.69x KernelBench geomeans are over PyTorch eager, a weak "
                    "baseline (ours over eager is in the details)",
        measured=cmp.effect, ci=cmp.ci, unit="log speedup", kind=Kind.EMPIRICAL, source=SOURCE, ruling=ruling,
        falsifier="If the kernels the search kept (chosen by callgrind's cost) ran no faster on this CPU than gcc's "
                  "own -O3 -march=native or one-shot -ffast-math build, NumPy, the first candidate or random "
                  "search's kernel, the interval over problems would reach 0; the CPU's timing of gcc's code "
                  "decides that, not our constants",
        replication={"unit": "timing rounds (each arm once per round)", "n": ROUNDS * len(ps),
                     "clustered_by": "problem"},
        note=f"= {math.exp(cmp.effect):.2f}x over {cmp.strongest} (also {also}); {seed_note}; baselines in log "
             f"speedup over eager; {common}; torch.compile was not run (its CPU compile takes longer than the "
             "quick budget)",
        **cmp.claim_fields())
    eager = wall_comparison(logs, seed, (EAGER,))
    band = _paper_band(ps)
    weak = {"why not a claim": "eager (the naive program at -O1) is the weak baseline; the claim above is judged "
                               "against the strongest",
            "log_speedup": eager.effect, "ci": list(eager.ci), "speedup": math.exp(eager.effect),
            "paper": "2.42x (Level 1) / 4.69x (Level 2) geomean over PyTorch eager (KernelBench, GPU)",
            "paper_log_band": list(band)}
    return [claim], weak


def _claims_mcts_vs_other_searches(searches: Searches, plan: Plan, seed: int) -> list[Claim]:
    """MCTS vs the strongest other search or trivial pick (paired by run; seeds within a problem are clustered)."""
    clusters = searches.problem_of
    base = {"greedy": searches.log_speedups("greedy"), "random search": searches.log_speedups("random"),
            FIRST: searches.first_log_speedups(), "no-op (the unmodified kernel)": np.zeros(len(searches.jobs))}
    cmp = against_strongest(searches.log_speedups("mcts"), base, clusters=clusters, seed=seed)
    eff, lo, hi = stats.cluster_diff_ci(searches.log_speedups("mcts-shamreward"), base[cmp.strongest], clusters,
                                        seed=seed)
    ctl = verdicts.control("the tree's reward replaced by noise (sham-reward MCTS over the same baseline)", eff,
                           (lo, hi))
    return [Claim(
        statement=f"MCTS beats the strongest other search at equal budget ({plan.budget} kernels; greedy, random "
                  f"search, the first candidate, no-op): mean log-speedup difference over {len(searches.jobs)} "
                  "problem x seed runs",
        paper_value="+26% geomean over greedy (log 0.23), p=0.004", measured=cmp.effect, ci=cmp.ci, unit="log",
        kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
        ruling=(verdicts.uninformative(few) if (few := _too_few(searches)) else
                verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, paper=math.log(1.26), tol=0.5, control=ctl)),
        falsifier="If the tree search kept no cheaper kernels (callgrind's deterministic cost of gcc's code) than "
                  "greedy, random search or the first candidate at the same budget, the interval would reach 0; "
                  "the costs come from gcc and the simulated CPU, while the MCTS constants were set on other "
                  "(development) problems",
        replication=searches.replication(),
        note=f"cost = callgrind estimated cycles (deterministic); cluster bootstrap over test problems; the MCTS "
             f"constants were set on the development problems ({', '.join(DEV_PROBLEMS)}) and a synthetic trap "
             "landscape, none of them measured here; at these small budgets greedy's depth-first climb is hard to "
             "beat (the tests show MCTS escaping a planted trap that greedy cannot)")]


def _too_few(searches: Searches) -> str:
    """Why a search comparison over ``searches`` cannot be judged ('' when it can)."""
    return _few_problems(len(set(searches.problem_of)))


def _claims_search_memory(searches: Searches, seed: int) -> list[Claim]:
    """Search memory (the edit-effect table re-ranking proposals): MCTS with it vs without."""
    ln = searches.log_speedups("mcts-nomem")
    eff, lo, hi = stats.cluster_diff_ci(searches.log_speedups("mcts"), ln, searches.problem_of, seed=seed)
    c_eff, c_lo, c_hi = stats.cluster_diff_ci(searches.log_speedups("mcts-shammem"), ln, searches.problem_of,
                                              seed=seed)
    ctl = verdicts.control("the memory's effects credited to the wrong edits (a fixed derangement of the edit "
                           "names) vs no memory", c_eff, (c_lo, c_hi))
    mem_rule = (verdicts.uninformative(few) if (few := _too_few(searches)) else
                verdicts.direction(eff, (lo, hi), expected_sign=1, control=ctl,
                                   why="the paper reports only non-significance, no size"))
    mem_note = (mem_rule.reason if mem_rule.verdict is verdicts.Verdict.UNINFORMATIVE else
                "not separated from noise, as in the paper's non-significant ablation"
                if mem_rule.direction == "not separated" else
                "separated from noise here (the paper found no significant effect); with few problems and "
                "deterministic proposers, one changed ranking moves every seed the same way")
    return [Claim(
        statement="search memory (edit-effect table re-ranking proposals) improves MCTS",
        paper_value="not significant in the paper's ablation", measured=eff, ci=(lo, hi), unit="log",
        kind=Kind.EMPIRICAL, source=EPISODE, ruling=mem_rule, replication=searches.replication(),
        falsifier="If re-ranking edits by their measured effect on other kernels of the same problem found no "
                  "cheaper kernels than MCTS without it, the interval would reach 0; the edits' effects are "
                  "gcc's and the simulated CPU's, not ours",
        baseline=f"MCTS without memory: geomean {math.exp(float(ln.mean())):.2f}x", note=mem_note)]


def _claims_diagnoses_as_input(searches: Searches, seed: int, budget: int) -> tuple[list[Claim], dict]:
    """Diagnoses vs no profiling as the proposer's input (the same greedy search), at each problem's root budget.

    The budget is the number of edits applicable to the reference (:func:`root_budget`): the order of the
    proposals is what the diagnoses change, and at that budget no order can try every first step. With a budget
    that covers the applicable edits greedy search reaches the same kernel from either order, so the final
    speedups tie exactly; that tie and the area under the whole search curve are kept in the details."""
    logs = {name: searches.log_speedups(name) for name in ROOT_INPUTS}
    clusters = searches.problem_of
    base = {ROOT_INPUTS[1]: logs[ROOT_INPUTS[1]], ROOT_INPUTS[2]: logs[ROOT_INPUTS[2]],
            FIRST: searches.first_log_speedups(), "no-op (the unmodified kernel)": np.zeros(len(searches.jobs))}
    cmp = against_strongest(logs["diagnoses"], base, clusters=clusters, seed=seed)
    c_eff, c_lo, c_hi = stats.cluster_diff_ci(logs["sham diagnoses"], base[cmp.strongest], clusters, seed=seed)
    ctl = verdicts.control("sham diagnoses (each diagnosis's recommended edits replaced by random ones) over the "
                           "same baseline", c_eff, (c_lo, c_hi))
    budgets = {p: searches.results["diagnoses"][(p, searches.seeds[0])].evaluations for p in dict.fromkeys(clusters)}
    why = ("the sources give the paper's speedup with no profiling (3.3x) and with raw counters (1.8x) but not "
           "its speedup with the tools in that ablation, so no tools-vs-none difference exists to compare; tools "
           "vs raw metrics is reported only as p<0.0001")
    claim = Claim(
        statement="diagnoses as the proposer's input beat no profiling (greedy search; the rule proposer ranking "
                  "edits by the diagnoses vs the fixed catalogue order, a random order, the first candidate, "
                  "no-op): log speedup (callgrind cost) of the best kernel at a budget of as many kernels as the "
                  "reference has applicable edits",
        paper_value="no profiling 3.3x, raw counters 1.8x (the tools' own speedup in that ablation is not given; "
                    "tools beat raw metrics, p<0.0001)",
        measured=cmp.effect, ci=cmp.ci, unit="log", kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
        ruling=(verdicts.uninformative(few) if (few := _too_few(searches)) else
                verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, why=why, control=ctl)),
        falsifier="If ranking edits by what the tools read from each kernel's real objdump and callgrind output "
                  "reached no cheaper kernel within the budget than the fixed or a random order, the interval "
                  "would reach 0; whether a recommended edit speeds a kernel up is decided by gcc and the CPU, "
                  "though the tools' rules and the catalogue order are ours",
        replication=searches.replication(),
        note=f"budget per problem (the reference counts as one kernel): "
             f"{', '.join(f'{p} {b}' for p, b in budgets.items())}; chosen as the number of single edits "
             "applicable to the reference, before any result; a rule proposer, not an LLM: this shows the "
             "diagnoses carry ranking information, not how an LLM uses them")
    lnp = searches.anytime_log_speedups("greedy-noprofile", budget)
    a_eff, a_lo, a_hi = stats.cluster_diff_ci(searches.anytime_log_speedups("greedy", budget), lnp, clusters,
                                              seed=seed)
    end, end_lo, end_hi = stats.cluster_diff_ci(searches.log_speedups("greedy"),
                                                searches.log_speedups("greedy-noprofile"), clusters, seed=seed)
    whole = {"budget": budget,
             "area_under_curve_diff": {"effect": a_eff, "ci": [a_lo, a_hi],
                                       "what": "mean over evaluations 1..budget of the log best-so-far speedup, "
                                               "greedy with diagnoses minus without"},
             "end_of_budget_diff": {"effect": end, "ci": [end_lo, end_hi],
                                    "what": "final log speedup at the plan's budget, with minus without: greedy "
                                            "reaches the same kernel from either order once the budget covers "
                                            "the applicable edits"}}
    not_here = not_checkable("raw counters made the LLM worse than no profiling", "1.8x vs 3.3x",
                             "needs an LLM that reads raw counters; the one offline LLM (SmolLM2-135M) cannot write "
                             "kernels, and a rule proposer cannot read raw counters without the tools' knowledge",
                             EPISODE)
    return [claim, not_here], whole


# instructions executed per FLOP at or above which a kernel shows no vector speed-up in the dynamic count
SCALAR_IR_PER_FLOP = 0.75


def _claims_scalar_fallback(searches: Searches) -> tuple[list[Claim], dict]:
    """The scalar-fallback tool (static, objdump) checked against the dynamic instruction count (callgrind).

    A check, not an empirical claim: every kernel here is one we generated, and -O1 never vectorises, so the
    tool finding scalar kernels among them is true by the set-up. What can fail is the tool itself: a flagged
    kernel whose executed instructions per FLOP show vector code would be a wrong diagnosis."""
    all_cands = [c for e in searches.evaluators.values() for c in e.memo.values() if c.compiled and c.metrics]
    fired = [c for c in all_cands if any(d.tool == "scalar_fallback" for d in c.diagnoses)]
    wrong = [c for c in fired if c.metrics["Ir"] / c.metrics["flops"] < SCALAR_IR_PER_FLOP]
    # "silent": vectorisation was asked for (-O3 or the omp simd pragma) and gcc still emitted scalar FP code
    asked = [c for c in all_cands if c.config.opt == "-O3" or c.config.simd]
    flagged = {id(c) for c in fired}
    silent = [c for c in asked if id(c) in flagged]
    counts = {"compiled_kernels": len(all_cands), "flagged": len(fired), "flagged_but_vector_in_dynamic_count":
              len(wrong), "vectorisation_asked_for": len(asked), "flagged_although_asked_for": len(silent),
              "silent_examples": sorted({c.config.short() for c in silent})[:10]}
    return [Claim(
        statement="the disassembly tool's scalar-fallback flag agrees with the dynamic instruction count: no "
                  f"flagged kernel executes fewer than {SCALAR_IR_PER_FLOP} instructions per FLOP",
        paper_value="37 kernels caught silently falling back to scalar", measured=float(len(wrong)),
        unit="wrongly flagged kernels", kind=Kind.CHECK, source=EPISODE,
        ruling=verdicts.bound(len(wrong), 0, sense="<=", exact=True),
        note=f"flagged {len(fired)} of {len(all_cands)} compiled kernels, {len(wrong)} of them vector in the dynamic "
             f"count; among the {len(asked)} kernels built with vectorisation asked for (-O3 or omp simd), gcc "
             f"emitted scalar FP code in {len(silent)} and the tool flagged them; the kernels are ours, so finding "
             "scalar ones is not evidence for the paper's 37")], counts


def _claims_correctness_wall(searches: Searches, plan: Plan) -> list[Claim]:
    """Fast-but-wrong candidates appeared, and none was ever the best of a search."""
    runs = [r for m in METHODS for r in searches.results[m].values()]
    fbw = [c for r in runs for c in r.fast_but_wrong]
    # counted per search (a search can meet several), so the count never exceeds the searches it is out of
    searches_with = sum(bool(r.fast_but_wrong) for r in runs)
    won = sum(not r.best.ok for m in searches.results for r in searches.results[m].values())
    return [
        Claim(statement="fast-but-wrong candidates appeared (the proposer's unsafe 'drop the remainder loop' edit)",
              paper_value="the wall keeps the search from being seduced by fast garbage", measured=float(searches_with),
              unit="searches", kind=Kind.PLANTED, source=EPISODE, ruling=verdicts.found(searches_with, len(runs)),
              note=f"in {searches_with} of {len(runs)} searches, {len(fbw)} such candidates in all; the rule proposer "
                   f"puts the unsafe edit first with probability {plan.risky}; sizes are not multiples of 8, so "
                   "dropping the tail is wrong"),
        Claim(statement="no incorrect kernel was ever the best of a search (correctness wall)",
              paper_value="incorrect kernels never earn reward", measured=float(won), kind=Kind.CHECK,
              source=SOURCE, ruling=verdicts.bound(won, 0, sense="<=", exact=True)),
    ]


def _claims_not_checkable_here() -> list[Claim]:
    """Energy and the GPU claims: what this machine cannot measure, and why."""
    rapl = Path("/sys/class/powercap/intel-rapl:0/energy_uj")
    claims = [not_checkable("energy at matched speed", "-11.6%",
                            "RAPL energy counters are not exposed on this machine" if not rapl.exists() else
                            "RAPL is exposed but energy-aware search was not built in this reproduction", SOURCE)]
    for stmt, pv in [("KernelBench Level 3 geomean speedup over PyTorch eager", "5.30x"),
                     ("VeOmni MoE training kernel vs hand-tuned Triton (CuTe/WGMMA, 18 iterations)", "1.23x"),
                     ("micro-tools vs raw metrics with an LLM on GPU (Nsight Compute tools)", "p<0.0001"),
                     ("proactive tool orchestration", "+23% (p=0.035)")]:
        claims.append(not_checkable(stmt, pv, "GPU claim: the CPU backend cannot measure it (CUDA/Triton kernels, "
                                    "Nsight Compute and an LLM kernel writer are needed); only the CPU backend was "
                                    "built", SOURCE))
    return claims
