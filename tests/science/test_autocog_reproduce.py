"""AutoCog (E176) smoke reproduction: claims are computed, typed, re-checkable and seed-deterministic."""

from __future__ import annotations

from divelab import verdicts
from divelab.claims import Kind
from divelab.science.autocog.reproduce import reproduce


def test_smoke_reproduction_computes_claims():
    rep = reproduce("smoke", seed=0)
    assert rep.system == "autocog" and len(rep.claims) >= 6
    kinds = {c.kind for c in rep.claims}
    assert Kind.CHECK in kinds and Kind.EMPIRICAL in kinds
    for c in rep.claims:  # every verdict re-applies from its recorded rule
        assert verdicts.reapply(c.rule).verdict is c.verdict, c.statement
    dial = next(c for c in rep.claims if "dial" in c.paper_value)
    assert dial.measured < 1e-9
    runs = rep.details["runs"]
    assert all(len(r["classes"]) == 2 for r in runs)
    conf = rep.details["confirmatory"]
    assert set(conf["pvalues"]) == {"H1", "H2", "H3"} and all(0 <= p <= 1 for p in conf["pvalues"].values())
    # same seed -> same numbers
    again = reproduce("smoke", seed=0)
    assert [c.measured for c in again.claims] == [c.measured for c in rep.claims]
