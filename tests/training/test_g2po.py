"""The G2PO reproduction at smoke scale computes its claims over several set-ups."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.claims import Kind, Verdict
from divelab.rl.presets import GROUP_SIZE, TESTBEDS
from divelab.scaleout import run_reproduction
from divelab.training.g2po.reproduce import PLANS, _across, _plan, setups
from divelab.verdicts import reapply


def test_setups_cross_game_sets_and_warm_starts_and_mark_the_tuned_one() -> None:
    sups = setups(PLANS["quick"], seed=0)
    assert len(sups) == 4
    assert {(s.testbed.game_seed0, s.testbed.seed) for s in sups} == {(0, 0), (0, 1), (100, 0), (100, 1)}
    assert [s.preregistered for s in sups] == [False, True, True, True]  # game set 0 / warm 0 was tuned on
    training = PLANS["quick"].training
    primary, other = _plan(training, 0, primary=True), _plan(training, 0, primary=False)
    # quick: one training run of every method in every set-up (the units); the control on the primary set-up only
    assert ("control" in {c for _, c, _ in primary}) and ("control" not in {c for _, c, _ in other})
    assert sorted(m for _, c, m in other) == ["g2po", "gigpo", "grpo"]
    # full: more units than quick, several seeds in each (clustered into the unit's mean)
    assert len(setups(PLANS["full"], seed=0)) > len(sups) and PLANS["full"].training.seeds(0)[1:]


def test_the_plan_takes_the_rl_engines_presets() -> None:
    # the test bed and group size are the engine's (shared with InfoTree and others), held by value
    for scale, plan in PLANS.items():
        assert plan.testbed == TESTBEDS[scale] and plan.training.group_size == GROUP_SIZE[scale]
    assert PLANS["full"].training.seeds(5) == [5, 6, 7]


def test_across_is_a_t_interval_over_setup_means() -> None:
    m, ci, means = _across({"a": [10.0, 20.0], "b": [0.0], "c": [5.0, 5.0]})
    assert means == [15.0, 0.0, 5.0] and m == pytest.approx(20 / 3)
    assert ci[0] < 0 < ci[1]  # three set-ups that disagree: the interval is wide
    with pytest.raises(ValueError):
        _across({"a": []})


def test_reproduce_smoke_computes_claims() -> None:
    rep = run_reproduction("divelab.training.g2po", "smoke", 0)
    assert rep.system == "g2po" and len(rep.claims) >= 7
    for c in rep.claims:
        assert c.kind in Kind
        if c.verdict is not Verdict.NOT_CHECKABLE:
            assert isinstance(c.measured, float)
            assert reapply(c.rule).verdict is c.verdict  # every verdict follows from its recorded rule
    kinds = {c.statement: c.kind for c in rep.claims}
    assert kinds["G2PO's gain over GRPO when states almost never repeat (control games)"] is Kind.BY_CONSTRUCTION
    assert rep.figures and rep.setup
    runs = rep.details["runs"]
    assert {r["method"] for r in runs} == {"grpo", "gigpo", "g2po"}
    assert {r["condition"] for r in runs} == {"repeat", "control"}
    names = list(rep.details["setups"])
    assert len(names) == 2 and {r["setup"] for r in runs} == set(names)
    for n in names:
        # same seed and same start: the first iteration's rollouts are identical across methods
        first = {r["success"][0] for r in runs if r["condition"] == "repeat" and r["setup"] == n}
        assert len(first) == 1
        # with no repeated state every g2po/gigpo TD/anchor term is 0, so they train exactly like grpo
        ctl = {r["method"]: r for r in runs if r["condition"] == "control" and r["setup"] == n}
        assert ctl["g2po"]["success"] == ctl["grpo"]["success"] == ctl["gigpo"]["success"]
        assert ctl["g2po"]["kl"] == ctl["grpo"]["kl"]
    # the control's states never repeat, the real games' do
    rep_states = [r for r in runs if r["condition"] == "repeat"][0]
    ctl_states = [r for r in runs if r["condition"] == "control"][0]
    assert rep_states["distinct_states"][0] < rep_states["n_steps"][0]
    assert ctl_states["distinct_states"][0] == ctl_states["n_steps"][0]
    shares = [r["within_decision_share"] for r in runs if r["condition"] == "repeat" and r["method"] == "grpo"][0]
    assert set(shares) == {"grpo", "gigpo", "g2po", "g2po-edge-only"}
    # the headline is judged against the strongest baseline measured (grpo and gigpo both recorded),
    # as the mean over set-up means of the paired per-seed gains over it
    head = next(c for c in rep.claims if c.statement.startswith("G2PO beats the strongest baseline"))
    assert {b["name"] for b in head.baselines} == {"grpo", "gigpo"}
    assert head.compared_with == max(head.baselines, key=lambda b: b["value"])["name"]
    per = rep.details["gains_points"][f"repeat/g2po-{head.compared_with}"]
    assert head.measured == pytest.approx(np.mean([np.mean(v) for v in per.values()]))
    # two iterations at smoke do not improve success: a failed set-up, so the comparisons are uninformative
    setup_check = next(c for c in rep.claims if c.statement.startswith("Setup check"))
    assert setup_check.ci[0] <= 0
    for c in rep.claims:
        if c.statement.startswith(("G2PO beats the strongest baseline", "GiGPO vs GRPO")):
            assert c.verdict is Verdict.UNINFORMATIVE and "failed set-up" in c.rule["args"]["reason"]
            assert "Replication units: 2 set-ups" in c.note and "80% power" in c.note
    # one measurement, one claim: no separate G2PO-vs-GiGPO or pre-registered-subset duplicates
    assert not any(c.statement.startswith(("G2PO vs GiGPO", "G2PO beats GRPO")) for c in rep.claims)
    # the training-improves prerequisite is a set-up check, not evidence about the paper
    assert kinds["Setup check: GRPO-style training improves success over its start (all methods)"] is Kind.CHECK
    # a timing from 2 runs gets no verdict; the control's bound is exact (identical seeded runs)
    share = next(c for c in rep.claims if c.statement.startswith("Graph bookkeeping"))
    assert share.verdict is Verdict.NOT_CHECKABLE
    ctl = next(c for c in rep.claims if c.statement.startswith("G2PO's gain over GRPO when states almost never"))
    assert ctl.rule["args"]["exact"] is True
    # the comparisons carry their audit trail: falsifier, set-ups as units, the control games as negative control
    for c in (head, next(c for c in rep.claims if c.statement.startswith("GiGPO vs GRPO"))):
        assert c.falsifier and c.replication == {"unit": "set-ups (a game set x a warm start)", "n": 2,
                                                 "clustered_by": "training seeds, averaged within a set-up"}
        if c.verdict is not Verdict.UNINFORMATIVE:  # smoke's failed set-up records no comparison at all
            control = c.rule["args"]["control"]
            assert "control games" in control["name"] and control["effect"] == 0.0  # identical runs there
    # smoke and quick skip the public games
    assert not any("public games" in c.statement for c in rep.claims)


def test_warm_starts_differ_by_seed_and_are_deterministic(tmp_path, monkeypatch) -> None:
    from divelab.rl.testbed import build_testbed

    cfg0 = setups(PLANS["smoke"], seed=0)
    weights = []
    for d in ("a", "b"):
        monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path / d))
        tbs = [build_testbed(s.testbed) for s in cfg0]
        weights.append([t.weights.read_bytes() for t in tbs])
    assert weights[0] == weights[1]  # same seed, fresh cache -> byte-identical warm starts
    assert weights[0][0] != weights[0][1]  # a different warm seed is a different start


def _results(success: dict[tuple[str, str], list[float]]):
    """A fake experiment: one seed per unit, each (unit, method) with the given success curve."""
    from divelab.training.g2po.reproduce import _Results

    units = sorted({u for u, _ in success})
    runs = [{"setup": u, "seed": 0, "condition": "repeat", "method": m, "success": s}
            for (u, m), s in success.items()]
    return _Results({"runs": runs, "seeds": [0], "setups": {u: {"preregistered": i > 0} for i, u in enumerate(units)}})


def test_a_comparison_at_the_ceiling_or_on_a_failed_setup_is_uninformative() -> None:
    from divelab.claims import Verdict
    from divelab.training.g2po.reproduce import _comparison_ruling

    def ruling(curves):
        res = _results({(u, m): c for u, per in curves.items() for m, c in per.items()})
        g = res.gains("repeat", "g2po", "grpo")
        m, ci, _ = _across(g)
        return _comparison_ruling(res, ("g2po", "grpo"), g, m, ci, training_runs=len(g), why="a test")

    learn = {"grpo": [0.2, 0.5, 0.6, 0.6], "g2po": [0.2, 0.6, 0.8, 0.8]}
    ok, text = ruling({"u0": learn, "u1": {"grpo": [0.2, 0.4, 0.5, 0.5], "g2po": [0.2, 0.6, 0.9, 0.9]},
                       "u2": {"grpo": [0.1, 0.6, 0.7, 0.7], "g2po": [0.1, 0.7, 0.8, 0.8]}})
    assert ok.verdict is not Verdict.UNINFORMATIVE and "80% power" in text and "none" in text
    top = {"grpo": [0.5, 1.0, 1.0, 1.0], "g2po": [0.5, 1.0, 1.0, 1.0]}
    ceiling, text = ruling({"u0": top, "u1": top})
    assert ceiling.verdict is Verdict.UNINFORMATIVE and "ceiling" in ceiling.reason and "u0, u1" in text
    flat = {"grpo": [0.3, 0.3, 0.3, 0.3], "g2po": [0.3, 0.3, 0.35, 0.35]}
    failed, _ = ruling({"u0": flat, "u1": {"grpo": [0.4] * 4, "g2po": [0.4, 0.4, 0.3, 0.3]}})
    assert failed.verdict is Verdict.UNINFORMATIVE and "failed set-up" in failed.reason


def test_the_control_of_a_comparison_reads_gigpo_as_grpo_where_gigpo_did_not_run_on_the_control_games() -> None:
    from divelab.training.g2po.reproduce import _control_of, _Results

    curve = [0.2, 0.5, 0.6, 0.6]
    runs = [{"setup": "u0", "seed": 0, "condition": c, "method": m, "success": curve}
            for c, ms in (("repeat", ("grpo", "gigpo", "g2po")), ("control", ("grpo", "g2po"))) for m in ms]
    res = _Results({"runs": runs, "seeds": [0], "setups": {"u0": {"preregistered": False}}})
    ctl = _control_of(res, "g2po", "gigpo")
    assert ctl is not None and "gigpo (as grpo: no anchors)" in ctl["name"] and ctl["effect"] == 0.0
    assert _control_of(res, "gigpo", "grpo") is None  # gigpo itself never ran there


def _public_data(g2po_gain: float, control_gain: float, learn: bool = True) -> dict:
    start = 0.2
    runs = []
    for s in range(4):
        for cond, extra in (("repeat", g2po_gain), ("control", control_gain)):
            for m, bonus in (("grpo", 0.0), ("gigpo", 0.01), ("g2po", extra)):
                end = (0.5 + 0.02 * s + bonus) if learn else start
                runs.append({"setup": "TextWorldExpress coin collector", "seed": s, "condition": cond, "method": m,
                             "success": [start, end, end, end]})
    return {"public_runs": runs, "iterations": 4, "group_size": 8,
            "public": {"testbed": {"params": "numLocations=11", "max_steps": 12, "sft_episodes": 32,
                                   "sft_steps": 300}, "games": ["g0", "g1"], "seeds": [0, 1, 2, 3],
                       "random_success": 0.15}}


@pytest.mark.parametrize("g2po_gain, control_gain, learn, verdict", [
    (0.1, 0.0, True, Verdict.DIRECTION_HOLDS),  # gains over the strongest, none on the control games
    (0.1, 0.1, True, Verdict.UNINFORMATIVE),  # the control games show it too: the set-up, not the graph
    (0.1, 0.0, False, Verdict.UNINFORMATIVE),  # no learning: a failed set-up
])
def test_the_public_games_claim_is_judged_by_the_same_rules(g2po_gain, control_gain, learn, verdict) -> None:
    from divelab.training.g2po.reproduce import PUBLIC, _claims_public

    (claim,) = _claims_public(_public_data(g2po_gain, control_gain, learn))
    assert PUBLIC in claim.statement and (claim.compared_with == "gigpo" or not learn)
    assert claim.verdict is verdict, (claim.verdict, claim.reason)
    assert claim.replication == {"unit": "training runs (paired by seed)", "n": 4, "clustered_by": ""}
    assert "TextWorldExpress" in claim.falsifier
    if learn:  # a failed set-up records no comparison, so no control either
        assert "session id" in claim.rule["args"]["control"]["name"]
    assert _claims_public({"runs": []}) == []
    assert PLANS["full"].public is not None and PLANS["quick"].public is None
