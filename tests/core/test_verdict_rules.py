"""Every claim of every reproduction: a kind, and a verdict that follows from its declared rule.

Runs each implemented system at smoke scale, re-applies each claim's recorded rule to its recorded
values and checks the verdict, the direction and the size come out the same. A verdict chosen by
hand, or a rule recorded with other values than it was decided on, fails here.
"""

import pytest

from divelab import registry, verdicts
from divelab.claims import Kind, Verdict
from divelab.scaleout import run_reproduction


@pytest.mark.slow
@pytest.mark.parametrize("system", registry.implemented(), ids=lambda s: s.key)
def test_every_verdict_follows_from_its_rule(system):
    rep = run_reproduction(system.module, "smoke", 0)
    assert rep.claims, f"{system.key} made no claims"
    if any(c.kind is Kind.PLANTED for c in rep.claims):
        assert rep.planted.strip(), f"{system.key} has planted claims but does not say what its set-up plants"
    for c in rep.claims:
        assert isinstance(c.kind, Kind), c.statement
        if c.verdict is Verdict.NOT_CHECKABLE:
            assert c.note and c.measured is None, c.statement
            continue
        again = verdicts.reapply(c.rule)
        assert (again.verdict, again.direction, again.size) == (c.verdict, c.direction, c.size), c.statement


def test_a_value_judged_by_size_alone_needs_its_whole_interval_on_one_side_of_the_band():
    from divelab import verdicts
    from divelab.verdicts import Verdict

    inside = verdicts.value(0.9, paper=0.9, tol=0.05, tol_kind="abs", ci=(0.87, 0.93))
    assert inside.verdict is Verdict.REPRODUCED
    straddle = verdicts.value(0.9, paper=0.9, tol=0.05, tol_kind="abs", ci=(0.6, 0.99))
    assert straddle.verdict is Verdict.NOT_SEPARATED and "reaches both inside and outside" in straddle.reason
    outside_point = verdicts.value(0.7, paper=0.9, tol=0.05, tol_kind="abs", ci=(0.6, 0.88))
    assert outside_point.verdict is Verdict.NOT_SEPARATED
    outside = verdicts.value(0.7, paper=0.9, tol=0.05, tol_kind="abs", ci=(0.6, 0.8))
    assert outside.verdict is Verdict.NOT_REPRODUCED
    assert verdicts.value(0.9, paper=0.9, tol=0.05, tol_kind="abs", exact=True).verdict is Verdict.REPRODUCED
    assert verdicts.reapply(straddle.rule).verdict is Verdict.NOT_SEPARATED
