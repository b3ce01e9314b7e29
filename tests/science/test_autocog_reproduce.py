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
    c = _diff_claim(list(reversed(a)), b, "s", "p", 0.5, "base", "n", seed=0)
    assert c.kind is Kind.PLANTED and c.ci[0] <= 0.0 < c.ci[1]
