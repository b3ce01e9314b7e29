"""KernelPro (E177) on the CPU backend: real gcc kernels, objdump + callgrind micro-tools, MCTS vs baselines.

Search rewards use callgrind's estimated cycles (``CEst``, deterministic on a shared machine);
the wall-clock speedups of the best kernels come from interleaved timing rounds (every arm once per
round), judged against the strongest baseline measured (eager -O1, NumPy/BLAS, a one-shot -O3 build)
with an interval that resamples whole problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.coding.kernelpro import backend
from divelab.coding.kernelpro.evaluate import Evaluator
from divelab.coding.kernelpro.problems import PROBLEMS
from divelab.coding.kernelpro.program import Config
from divelab.coding.kernelpro.proposer import RandomProposer, RuleProposer
from divelab.coding.kernelpro.roofline import Roofline, measure_roofline
from divelab.coding.kernelpro.search import MCTS, Greedy, RandomSearch
from divelab.comparisons import against_strongest
from divelab.progress import track

SOURCE = "arXiv 2606.26453; week-in-review E177"
# what only the review's discussion of the paper reports (not a number from the paper's tables)
EPISODE = "week-in-review E177"
# the strongest simple alternative to a search: compile the naive program with every flag at once
COMPILER_ONLY = Config(opt="-O3", avx2=True, restrict=True, fast_math=True)
# wall-clock timing rounds: every arm is timed once per round, so load drifts hit all arms alike
ROUNDS = 7
EAGER, NUMPY, ONE_SHOT = "eager (naive program at -O1)", "NumPy/BLAS", "one-shot -O3 -mavx2 -ffast-math build"
# search methods compared; the claims read them by these names
METHODS = ("mcts", "mcts-nomem", "greedy", "random", "greedy-noprofile")


@dataclass(frozen=True)
class Plan:
    problems: tuple[str, ...]
    """KernelBench-shaped CPU problems searched and timed (names from ``kernelpro.problems``)."""
    budget: int
    """distinct kernels each search may compile, check and profile."""
    seeds: int
    """search runs per method and problem (seeds ``seed``, ``seed+1``, ...)."""
    risky: float = 0.2
    """probability that the rule proposer puts its unsafe edit (drop the remainder loop) first."""


PLANS = {
    "smoke": Plan(("rowsum",), budget=2, seeds=1),
    "quick": Plan(("matmul", "softmax", "linear_relu", "scale_softmax"), budget=8, seeds=2),
    "full": Plan(tuple(PROBLEMS), budget=30, seeds=5),
}


@dataclass
class Searches:
    """Every search run: ``results[method][(problem, seed)]``, and one evaluator (with its memo) per problem."""

    results: dict[str, dict[tuple[str, int], object]]
    evaluators: dict[str, Evaluator]
    jobs: list[tuple[str, int]]
    seeds: list[int]

    def log_speedups(self, method: str) -> np.ndarray:
        """Log callgrind-cost speedup of each (problem, seed) run of ``method``, in ``jobs`` order."""
        return np.log(np.array([self.results[method][j].speedup for j in self.jobs]))

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
    roof = measure_roofline()
    rep.details["roofline"] = {"peak_GFLOPs": roof.peak_flops / 1e9, "bandwidth_GBs": roof.bandwidth / 1e9,
                               "ridge_flop_per_byte": roof.ridge}
    searches = _search(plan, seed, roof)
    rep.details["searches"] = {m: {f"{p}/seed{s}": {"speedup_cest": r.speedup, "best": r.best.config.short(),
                                                    "evaluations": r.evaluations}
                                   for (p, s), r in searches.results[m].items()} for m in METHODS}
    rep.details["distinct_kernels_evaluated"] = {p: e.evaluations for p, e in searches.evaluators.items()}
    walls, logs = _wall_clock(plan, searches)
    rep.details["wall_clock"] = walls

    rep.claims += _claims_wall_clock(logs, plan, seed)
    rep.claims += _claims_mcts_vs_other_searches(searches, plan, seed)
    rep.claims += _claims_search_memory(searches, seed)
    rep.claims += _claims_diagnoses_as_input(searches, seed)
    rep.claims += _claims_scalar_fallback(searches)
    rep.claims += _claims_correctness_wall(searches, plan)
    rep.claims += _claims_not_checkable_here()

    rep.figures.append(_figure({m: [searches.results[m][j].history for j in searches.jobs]
                                for m in ("mcts", "greedy", "random")}, plan.budget))
    rep.setup = (f"{len(plan.problems)} KernelBench-shaped CPU problems ({', '.join(plan.problems)}), each a C "
                 "kernel program + transformations compiled by gcc, called via ctypes, checked against a float64 "
                 f"NumPy reference; every search node is compiled, checked, disassembled (objdump) and run under "
                 f"callgrind; {plan.seeds} seed(s), budget {plan.budget} distinct kernels per search; machine "
                 f"roofline measured: {roof.peak_flops / 1e9:.1f} GFLOP/s, {roof.bandwidth / 1e9:.1f} GB/s.")
    rep.planted = (f"The rule proposer puts an unsafe edit (dropping the remainder loop, wrong because no size is a "
                   f"multiple of 8) first with probability {plan.risky}, so fast-but-wrong candidates are injected "
                   "by us and then caught by the correctness check.")
    return rep


def _search(plan: Plan, seed: int, roof: Roofline) -> Searches:
    """Every method searches every (problem, seed) with the same budget; evaluators are shared per problem."""
    seeds = [seed + i for i in range(plan.seeds)]
    methods = {
        "mcts": lambda s: MCTS(RuleProposer(plan.risky), seed=s),
        "mcts-nomem": lambda s: MCTS(RuleProposer(plan.risky), seed=s, memory=False),
        "greedy": lambda s: Greedy(RuleProposer(plan.risky), seed=s),
        "random": lambda s: RandomSearch(RandomProposer(), seed=s),
        "greedy-noprofile": lambda s: Greedy(_NoDiagnoses(RuleProposer(plan.risky)), seed=s),
    }
    results: dict[str, dict[tuple[str, int], object]] = {m: {} for m in METHODS}
    evaluators: dict[str, Evaluator] = {}
    jobs = [(p, s) for p in plan.problems for s in seeds]
    for p, s in track(jobs, "KernelPro: searching"):
        ev = evaluators.setdefault(p, Evaluator(PROBLEMS[p], roofline=roof))
        for m in METHODS:
            results[m][(p, s)] = methods[m](s).search(ev, plan.budget)
    return Searches(results, evaluators, jobs, seeds)


def _wall_clock(plan: Plan, searches: Searches) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """MCTS's best kernel (best over seeds by callgrind cost) vs every baseline, in interleaved timing rounds.

    Returns the per-problem record for ``details`` and, per problem and arm, the log speedup over the
    eager reference in each round (paired: the arms of a round ran back to back)."""
    walls, logs = {}, {}
    for p in plan.problems:
        prob = PROBLEMS[p]
        best = min((searches.results["mcts"][(p, s)].best for s in searches.seeds), key=lambda c: c.cost)
        ref = searches.results["mcts"][(p, searches.seeds[0])].ref
        xs = prob.make_inputs(1)
        out = np.zeros(prob.output, dtype=np.float32)
        calls = {"mcts": backend.load(backend.build(prob, best.config)),
                 EAGER: backend.load(backend.build(prob, ref.config)),
                 ONE_SHOT: backend.load(backend.build(prob, COMPILER_ONLY))}
        arms = {name: (lambda f=f, xs=xs, out=out: f(*xs, out)) for name, f in calls.items()}
        arms[NUMPY] = lambda xs=xs, prob=prob: prob.baseline(xs)
        t = interleaved_times(arms)
        logs[p] = {name: np.log(t[EAGER] / t[name]) for name in t}
        walls[p] = {"level": prob.level, "best": best.config.short(), "rounds": ROUNDS,
                    **{f"t_{name}_us": float(np.median(v) * 1e6) for name, v in t.items()},
                    **{f"speedup_over_{name}": float(np.median(t[name] / t["mcts"])) for name in t if name != "mcts"},
                    "speedup_cest": ref.cost / best.cost}
    return walls, logs


def _claims_wall_clock(logs: dict[str, dict[str, np.ndarray]], plan: Plan, seed: int) -> list[Claim]:
    """Per KernelBench level: the MCTS kernel's wall-clock speedup over the strongest baseline."""
    paper_level = {1: 2.42, 2: 4.69}
    claims = []
    for level in (1, 2):
        ps = [p for p in plan.problems if PROBLEMS[p].level == level]
        if not ps:
            continue
        cmp = wall_comparison({p: logs[p] for p in ps}, seed)
        claims.append(Claim(
            statement=f"KernelBench-shaped Level {level}: the MCTS kernel's speedup over the strongest baseline "
                      f"measured ({len(ps)} problems, wall clock, log scale)",
            paper_value=f"{paper_level[level]}x (KernelBench L{level}, GPU, over PyTorch eager)",
            measured=cmp.effect, ci=cmp.ci, unit="log speedup", kind=Kind.EMPIRICAL, source=SOURCE,
            ruling=verdicts.direction(cmp.effect, cmp.ci, paper=math.log(paper_level[level]), tol=0.5),
            note=f"= {math.exp(cmp.effect):.2f}x over {cmp.strongest}; the eager reference (the naive C program "
                 "at -O1, our stand-in for PyTorch eager) is the weakest baseline and stays listed; baselines in "
                 f"log speedup over eager; {ROUNDS} interleaved timing rounds per problem, interval resamples "
                 "whole problems; the kernel is the best of the search seeds by callgrind cost; torch.compile "
                 "was not run (its CPU compile takes longer than the quick budget)",
            **cmp.claim_fields()))
    return claims


def _claims_mcts_vs_other_searches(searches: Searches, plan: Plan, seed: int) -> list[Claim]:
    """MCTS vs the strongest other search (paired by run; seeds within a problem are clustered)."""
    cmp = against_strongest(searches.log_speedups("mcts"), {"greedy": searches.log_speedups("greedy"),
                                                            "random search": searches.log_speedups("random")},
                            clusters=searches.problem_of, seed=seed)
    return [Claim(
        statement=f"MCTS beats the strongest other search at equal budget ({plan.budget} kernels): mean log-speedup "
                  f"difference over {len(searches.jobs)} problem x seed runs",
        paper_value="+26% geomean over greedy (log 0.23), p=0.004", measured=cmp.effect, ci=cmp.ci, unit="log",
        kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
        ruling=verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, paper=math.log(1.26), tol=0.5),
        note="cost = callgrind estimated cycles (deterministic); cluster bootstrap over problems; MCTS constants were set on matmul/softmax/rowsum "
             "and a synthetic trap landscape; at these small budgets greedy's depth-first climb is hard to beat "
             "(the tests show MCTS escaping a planted trap that greedy cannot)")]


def _claims_search_memory(searches: Searches, seed: int) -> list[Claim]:
    """Search memory (the edit-effect table re-ranking proposals): MCTS with it vs without."""
    ln = searches.log_speedups("mcts-nomem")
    eff, lo, hi = stats.cluster_diff_ci(searches.log_speedups("mcts"), ln, searches.problem_of, seed=seed)
    mem_rule = verdicts.direction(eff, (lo, hi), expected_sign=1, why="the paper reports only non-significance")
    mem_note = ("not separated from noise, as in the paper's non-significant ablation"
                if mem_rule.direction == "not separated" else
                "separated from noise here (the paper found no significant effect); with few problems and "
                "deterministic proposers, one changed ranking moves every seed the same way")
    return [Claim(
        statement="search memory (edit-effect table re-ranking proposals) improves MCTS",
        paper_value="not significant in the paper's ablation", measured=eff, ci=(lo, hi), unit="log",
        kind=Kind.EMPIRICAL, source=EPISODE,
        ruling=mem_rule, baseline=f"MCTS without memory: geomean {math.exp(float(ln.mean())):.2f}x", note=mem_note)]


def _claims_diagnoses_as_input(searches: Searches, seed: int) -> list[Claim]:
    """Diagnoses vs no profiling as the proposer's input (same greedy search)."""
    lnp = searches.log_speedups("greedy-noprofile")
    eff, lo, hi = stats.cluster_diff_ci(searches.log_speedups("greedy"), lnp, searches.problem_of, seed=seed)
    return [
        Claim(
            statement="diagnoses as the proposer's input beat no profiling (greedy search, rule proposer ranked by "
                      "diagnoses vs a fixed edit order)",
            paper_value="micro-tools vs none: 3.3x without profiling, tools better (p<0.0001)", measured=eff,
            ci=(lo, hi), unit="log", kind=Kind.EMPIRICAL, source=SOURCE,
            ruling=verdicts.direction(eff, (lo, hi), expected_sign=1, why="the paper's numbers are LLM speedups on "
                                      "KernelBench, not comparable with a rule proposer's log-speedup difference"),
            baseline=f"no profiling: geomean {math.exp(float(lnp.mean())):.2f}x",
            note="a rule proposer, not an LLM: this shows the diagnoses carry ranking information, not how an LLM "
                 "uses them"),
        not_checkable("raw counters made the LLM worse than no profiling", "1.8x vs 3.3x",
                      "needs an LLM that reads raw counters; the one offline LLM (SmolLM2-135M) cannot write "
                      "kernels, and a rule proposer cannot read raw counters without the tools' knowledge",
                      EPISODE),
    ]


def _claims_scalar_fallback(searches: Searches) -> list[Claim]:
    """The scalar-fallback tool: where it fired, and was it right (callgrind instructions per FLOP as the check)."""
    all_cands = [c for e in searches.evaluators.values() for c in e.memo.values() if c.compiled and c.metrics]
    fired = [c for c in all_cands if any(d.tool == "scalar_fallback" for d in c.diagnoses)]
    right = [c for c in fired if c.metrics["Ir"] / c.metrics["flops"] >= 0.75]
    return [Claim(
        statement="the disassembly tool catches silent scalar fallback (fired on compiled kernels; 'right' = "
                  "callgrind shows >= 0.75 instructions per FLOP, i.e. no vector speed-up in the dynamic count)",
        paper_value="37 kernels caught silently falling back to scalar", measured=float(len(right)),
        kind=Kind.EMPIRICAL, source=EPISODE, ruling=verdicts.found(len(right), max(len(all_cands), 1)),
        note=f"fired on {len(fired)} of {len(all_cands)} compiled kernels, right on {len(right)} "
             f"(precision {len(right) / max(len(fired), 1):.2f}); static (objdump) vs dynamic (callgrind) evidence")]


def _claims_correctness_wall(searches: Searches, plan: Plan) -> list[Claim]:
    """Fast-but-wrong candidates appeared, and none was ever the best of a search."""
    runs = [r for m in METHODS for r in searches.results[m].values()]
    fbw = [c for r in runs for c in r.fast_but_wrong]
    won = sum(not r.best.ok for r in runs)
    return [
        Claim(statement="fast-but-wrong candidates appeared (the proposer's unsafe 'drop the remainder loop' edit)",
              paper_value="the wall keeps the search from being seduced by fast garbage", measured=float(len(fbw)),
              kind=Kind.PLANTED, source=EPISODE, ruling=verdicts.found(len(fbw), len(runs)),
              note=f"the rule proposer puts the unsafe edit first with probability {plan.risky}; sizes are not "
                   "multiples of 8, so dropping the tail is wrong"),
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
        claims.append(not_checkable(stmt, pv, "GPU claim: no GPU was lent to this task (CUDA/Triton kernels, "
                                    "Nsight Compute and an LLM kernel writer are needed); only the CPU backend was "
                                    "built", SOURCE))
    return claims


def wall_comparison(logs: dict[str, dict[str, np.ndarray]], seed: int = 0):
    """The MCTS kernel against the strongest baseline, from per-round log speedups over eager.

    ``logs[problem][arm]`` holds one value per timing round; rounds of one problem are paired across arms
    and clustered by problem, so the interval reflects problem-to-problem spread, not only timing noise.
    """
    problems = list(logs)
    method = np.concatenate([logs[p]["mcts"] for p in problems])
    baselines = {name: np.concatenate([logs[p][name] for p in problems]) for name in (EAGER, NUMPY, ONE_SHOT)}
    clusters = [p for p in problems for _ in logs[p]["mcts"]]
    return against_strongest(method, baselines, clusters=clusters, seed=seed)


class _NoDiagnoses:
    """A proposer wrapper that hides the diagnoses (the 'no profiling' input)."""

    def __init__(self, inner):
        self.inner = inner

    def propose(self, config, diagnoses, capabilities, rng):
        return self.inner.propose(config, [], capabilities, rng)
