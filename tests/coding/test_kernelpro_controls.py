"""KernelPro (E177): the negative controls (shams), the trivial baselines and the diagnoses ablation's budget.

The claim builders run here on searches of the synthetic cost model (no compiler), so the wiring of every
comparison can be checked at the scale the claims need (eight problems): which baselines it holds, which control
it records, and that a control showing the effect makes a positive verdict uninformative."""

from __future__ import annotations

import math
import random

import numpy as np

from divelab.claims import Kind
from divelab.coding.kernelpro import EDITS, MCTS, Config, RandomProposer, RuleProposer, SyntheticEvaluator
from divelab.coding.kernelpro.evaluate import Candidate
from divelab.coding.kernelpro.problems import PROBLEMS
from divelab.coding.kernelpro.proposer import NoDiagnoses, ShamDiagnoses
from divelab.coding.kernelpro.reproduce import (
    EAGER,
    FIRST,
    METHODS,
    NATIVE,
    NUMPY,
    ONE_SHOT,
    RANDOM_KERNEL,
    ROOT_INPUTS,
    ROUNDS,
    SHAM_KERNEL,
    Plan,
    Searches,
    _claims_diagnoses_as_input,
    _claims_mcts_vs_other_searches,
    _claims_search_memory,
    _claims_wall_clock,
    first_config,
    root_budget,
    search_methods,
    seed_arm,
)
from divelab.coding.kernelpro.search import R_MIN
from divelab.coding.kernelpro.tools import Diagnosis
from divelab.verdicts import Verdict


def test_sham_memory_is_a_derangement_of_the_edit_names():
    perm = MCTS(RuleProposer(), sham_memory=True, seed=3)._perm
    assert sorted(perm.values()) == sorted(EDITS) and all(perm[e] != e for e in EDITS)
    assert all(k == v for k, v in MCTS(RuleProposer(), seed=3)._perm.items())  # the real memory reads its own entry


def test_sham_reward_keeps_the_wall_but_not_the_speed():
    mcts = MCTS(RuleProposer(), sham_reward=True)
    fast, slow = Candidate(Config(), True, True, cost=1.0), Candidate(Config(), True, True, cost=90.0)
    wrong = Candidate(Config(drop_tail=True), True, False, cost=0.1)
    rng = random.Random(0)
    fast_r = [mcts._reward(100.0, fast, rng) for _ in range(200)]
    slow_r = [mcts._reward(100.0, slow, rng) for _ in range(200)]
    assert abs(np.mean(fast_r) - np.mean(slow_r)) < 0.6  # a 90x faster kernel earns no more on average
    assert mcts._reward(100.0, wrong, rng) == R_MIN
    assert MCTS(RuleProposer())._reward(100.0, fast, rng) > MCTS(RuleProposer())._reward(100.0, slow, rng)
    res = mcts.search(SyntheticEvaluator(2), 20)
    assert res.method == "mcts-shamreward" and res.best.ok


def test_no_and_sham_diagnoses_take_the_information_away():
    caps = frozenset({"order", "tile"})
    diags = [Diagnosis("strided", "strided inner loop", 0.9, {}, ["interchange", "tile32"]),
             Diagnosis("scalar", "scalar FP", 0.5, {}, ["simd"])]
    real = RuleProposer().propose(Config(), diags, caps, random.Random(0))
    fixed = NoDiagnoses(RuleProposer()).propose(Config(), diags, caps, random.Random(0))
    assert real[:2] == ["interchange", "tile32"] and fixed[0] == "opt_up"
    seen = set()
    for s in range(20):
        out = ShamDiagnoses(RuleProposer(), seed=s).propose(Config(), diags, caps, random.Random(0))
        assert sorted(out) == sorted(real)  # the same edits, another order
        seen.add(tuple(out[:3]))
    assert len(seen) > 5
    # the random order wastes budget on the unsafe edit as often as the rule proposer does
    firsts = [RandomProposer(risky=0.5).propose(Config(), [], caps, random.Random(s))[0] for s in range(200)]
    assert 60 < firsts.count("drop_tail") < 140
    assert "drop_tail" not in RandomProposer(risky=0.5).propose(Config(), [], caps, random.Random(1))[1:]


def test_root_budget_is_the_reference_neighbourhood_so_no_order_tries_every_first_step():
    for p in PROBLEMS.values():
        n = sum(1 for e in EDITS if e != "drop_tail" and (not EDITS[e][2] or EDITS[e][2] in p.capabilities))
        assert root_budget(p) == n
        # the reference plus its n one-edit neighbours is n + 1 kernels: one more than the budget
        assert root_budget(p) < n + 1


def synthetic_searches(n_problems: int = 8, seeds: tuple[int, ...] = (0, 1), budget: int = 14) -> Searches:
    methods, root = search_methods(0.2)
    results = {m: {} for m in (*METHODS, *ROOT_INPUTS)}
    evaluators, firsts, jobs = {}, {}, []
    for i in range(n_problems):
        p = f"syn{i}"
        ev = evaluators[p] = SyntheticEvaluator(i)
        for s in seeds:
            jobs.append((p, s))
            for m, f in methods.items():
                results[m][(p, s)] = f(s).search(ev, budget)
            for m, f in root.items():
                results[m][(p, s)] = f(s).search(ev, 7)
        firsts[p] = ev.evaluate(first_config(results["mcts"][(p, seeds[0])].ref, ev.problem))
    return Searches(results, evaluators, jobs, list(seeds), firsts)


def test_search_claims_hold_trivial_baselines_a_control_and_their_replication_unit():
    searches = synthetic_searches()
    (mcts,) = _claims_mcts_vs_other_searches(searches, Plan(tuple(f"syn{i}" for i in range(8)), 14, 2), 0)
    (memory,) = _claims_search_memory(searches, 0)
    (diag, not_here), whole = _claims_diagnoses_as_input(searches, 0, 14)
    assert {"greedy", "random search", FIRST, "no-op (the unmodified kernel)"} == {b["name"] for b in mcts.baselines}
    assert {ROOT_INPUTS[1], ROOT_INPUTS[2], FIRST, "no-op (the unmodified kernel)"} == {
        b["name"] for b in diag.baselines}
    for c, name in ((mcts, "sham-reward"), (memory, "wrong edits"), (diag, "sham diagnoses")):
        assert c.kind is Kind.EMPIRICAL and c.falsifier and name in c.rule["args"]["control"]["name"]
        assert c.replication == {"unit": "search runs (test problem x search seed)", "n": 16, "clustered_by": "problem"}
    # the paper gives no tools-vs-none size, and the claim says precisely why instead of skipping it
    assert "not given" in diag.paper_value and "3.3x" in diag.rule["args"]["why"]
    measured = [(c.measured, c.ci, c.unit) for c in (mcts, memory, diag)]
    assert len(set(measured)) == 3  # one measurement, one claim
    assert not_here.verdict is Verdict.NOT_CHECKABLE and set(whole) == {"budget", "area_under_curve_diff",
                                                                        "end_of_budget_diff"}


def fake_logs(mcts: float, sham: float, seeds=(0, 1), n: int = 8) -> dict:
    rng = np.random.default_rng(0)

    def arm(mu):
        return mu + 0.02 * rng.standard_normal(ROUNDS)

    logs = {}
    for i in range(n):
        logs[f"p{i}"] = {EAGER: np.zeros(ROUNDS), NATIVE: arm(0.6), NUMPY: arm(0.4), ONE_SHOT: arm(0.8), FIRST: arm(0.3),
                   **{seed_arm(s): arm(mcts) for s in seeds}, **{seed_arm(s, "random"): arm(0.5) for s in seeds},
                   **{seed_arm(s, "mcts-shamreward"): arm(sham) for s in seeds}}
    return logs


def test_the_wall_clock_claim_is_uninformative_when_the_sham_reward_kernel_wins_too(monkeypatch):
    from divelab.coding.kernelpro import reproduce

    problems = tuple(f"p{i}" for i in range(8))
    monkeypatch.setattr(reproduce, "PROBLEMS", {p: PROBLEMS["rmsnorm"] for p in problems})
    monkeypatch.setattr(reproduce, "_paper_band", lambda ps: (math.log(2.42), math.log(4.69)))
    plan = Plan(problems, 10, 2)
    (real,), weak = _claims_wall_clock(fake_logs(1.4, 0.7), plan, 0, [0, 1])
    assert real.compared_with == ONE_SHOT and real.verdict is Verdict.PARTLY  # 0.6 log vs 1.23x: size off
    assert {RANDOM_KERNEL, FIRST, EAGER} <= {b["name"] for b in real.baselines}
    assert real.replication == {"unit": "timing rounds (each arm once per round)", "n": 8 * ROUNDS,
                                "clustered_by": "problem"}
    assert weak["log_speedup"] > 1 and "weak baseline" in weak["why not a claim"]
    (shown,), _ = _claims_wall_clock(fake_logs(1.4, 1.4), plan, 0, [0, 1])
    assert shown.verdict is Verdict.UNINFORMATIVE and "negative control" in shown.reason
    assert SHAM_KERNEL not in {b["name"] for b in shown.baselines}
