"""AutoCog (E176) smoke reproduction: claims are computed, typed, re-checkable and seed-deterministic."""

from __future__ import annotations

from divelab import verdicts
from divelab.claims import Kind
from divelab.scaleout import run_reproduction


def test_smoke_reproduction_computes_claims():
    rep = run_reproduction("divelab.science.autocog", "smoke", 0)
    assert rep.system == "autocog" and len(rep.claims) >= 6
    kinds = {c.kind for c in rep.claims}
    # simulated participants use strategies inside the search grammar: nothing here is evidence about people
    assert Kind.CHECK in kinds and Kind.PLANTED in kinds and Kind.EMPIRICAL not in kinds
    assert "grammar" in rep.planted
    bounds = [c for c in rep.claims if c.rule["name"] == "bound"]
    assert bounds and all(c.rule["args"]["ci"] or c.rule["args"]["exact"] for c in bounds)
    for c in rep.claims:  # every verdict re-applies from its recorded rule
        assert verdicts.reapply(c.rule).verdict is c.verdict, c.statement
    dial = next(c for c in rep.claims if "dial" in c.paper_value)
    assert dial.measured < 1e-9
    runs = rep.details["runs"]
    assert all(len(r["classes"]) == 2 for r in runs)
    conf = rep.details["confirmatory"]
    assert set(conf["pvalues"]) == {"H1", "H2", "H3"} and all(0 <= p <= 1 for p in conf["pvalues"].values())
    for c in rep.claims:  # every claim that could turn positive carries its replication unit and a negative control
        if c.kind in (Kind.PLANTED, Kind.EMPIRICAL):
            assert c.replication and c.falsifier and "control" in c.rule["args"], c.statement
    assert all(r["shuffled"] in (False, True) for r in runs) and any(r["shuffled"] for r in runs)
    # same seed -> same numbers
    again = run_reproduction("divelab.science.autocog", "smoke", 0)
    assert [c.measured for c in again.claims] == [c.measured for c in rep.claims]


def test_ablation_interval_resamples_whole_strategies():
    from divelab.science.autocog.reproduce import _diff_claim

    def runs(recovered):
        return [{"strategy": s, "seed": sd, "recovered": r} for (s, sd), r in recovered.items()]

    # one strategy carries the whole difference: runs-as-units would call it separated, strategies cannot
    a = runs({("ttw", 0): 1, ("ttw", 1): 1, ("ttw", 2): 1, ("pers", 0): 0, ("pers", 1): 0, ("pers", 2): 0})
    b = runs({(s, sd): 0 for s, sd in [("ttw", 0), ("ttw", 1), ("ttw", 2), ("pers", 0), ("pers", 1), ("pers", 2)]})
    c = _diff_claim(list(reversed(a)), b, b, b, "s", "p", 0.5, "base", "n", seed=0)
    assert c.kind is Kind.PLANTED and c.ci[0] <= 0.0 < c.ci[1]
    assert c.rule["args"]["control"]["effect"] == 0.0 and c.replication["clustered_by"] == "ground-truth strategy"


def _fake_runs(recovered, pick, shuffled_recovered=lambda s: False, seeds=3):
    """Main and shuffled-choice runs for all six strategies: ``recovered(s)``, ``pick(s)`` per strategy."""
    from divelab.science.autocog.reproduce import CANONICAL, NONCANONICAL, Runs

    out = Runs()
    for s in CANONICAL + NONCANONICAL:
        for sd in range(seeds):
            base = {"strategy": s, "seed": sd, "design": "optimised", "metric": "adaptive", "cycles_to_recovery": 1}
            out.append({**base, "shuffled": False, "recovered": recovered(s), "one_experiment_pick": pick(s)})
            out.append({**base, "shuffled": True, "recovered": shuffled_recovered(s), "one_experiment_pick": None})
    return out


def test_recovery_is_judged_against_the_strongest_picker_that_does_not_search():
    from divelab.science.autocog.reproduce import PLANS, _claims_recovery

    start = ["tallying", "wadd"]  # what the two starting theories behave like
    # model selection from one experiment names every truth, as the loop does: a tie, nothing to credit the loop with
    claims, _ = _claims_recovery(_fake_runs(lambda s: True, lambda s: s), PLANS["quick"], start, seed=0)
    for c in claims:
        assert c.compared_with == "one random experiment, nearest of the known strategies"
        assert c.verdict is verdicts.Verdict.UNINFORMATIVE and c.measured == 0.0
        names = " | ".join(b["name"] for b in c.baselines)
        assert "uniform pick" in names and "first starting theory" in names and "most common" in names
        assert c.rule["args"]["control"]["effect"] == -1.0  # the loop on shuffled choices recovered nothing
        assert c.falsifier and c.replication == {"unit": "loop runs", "n": 9, "clustered_by": "ground-truth strategy"}
    # without the one-experiment baseline, the canonical loop still only adds TTB over the starting theories
    claims, _ = _claims_recovery(_fake_runs(lambda s: True, lambda s: "random"), PLANS["quick"], start, seed=0)
    canon = claims[0]
    assert canon.compared_with == "better starting theory in hindsight, never revised"
    assert abs(canon.measured - 1 / 3) < 1e-12 and canon.verdict is verdicts.Verdict.NOT_SEPARATED


def test_shuffled_choices_cut_the_link_between_ratings_and_choices():
    import numpy as np

    from divelab.science.autocog.baselines import ShuffledChoices
    from divelab.science.autocog.metrics import LIBRARY
    from divelab.science.autocog.recovery import probe_design
    from divelab.science.autocog.simulate import simulate
    from divelab.science.autocog.strategies import STRATEGIES

    design = probe_design()
    real = simulate(STRATEGIES["ttb"], design, 40, np.random.default_rng(3))
    shuf = ShuffledChoices(STRATEGIES["ttb"])(design, 40, np.random.default_rng(3))
    assert (shuf.chose_left.sum(axis=1) == real.chose_left.sum(axis=1)).all()  # same responses, other trials
    ttb = LIBRARY["ttb_consistency"]
    assert ttb(real).mean() > 0.85 and abs(ttb(shuf).mean() - 0.5) < 0.1


def test_one_experiment_model_selection_names_the_planted_strategies():
    from divelab.science.autocog.baselines import one_experiment_pick
    from divelab.science.autocog.strategies import STRATEGIES
    from divelab.science.autocog.task import Task

    for name in ("ttb", "tallying", "perseveration"):
        assert one_experiment_pick(STRATEGIES[name], Task(), seed=1) == name
