"""Smoke-scale SHERLOC reproduction: claims are computed (not that the paper was matched)."""

import pytest

from divelab.claims import Kind
from divelab.scaleout import run_reproduction


@pytest.mark.slow
def test_smoke_reproduction_computes_claims():
    rep = run_reproduction("divelab.coding.sherloc", "smoke", 0)
    loc = rep.details["localization"]
    assert set(loc) == {"sherloc", "bm25", "ochiai", "surprisal", "sherloc-heuristic"}
    for name, by in loc.items():
        for g in ("file", "function", "line"):
            assert 0.0 <= by[g]["acc@1"] <= by[g]["recall@5"] <= 1.0, (name, g)
    assert rep.details["n_tasks"] >= 1
    assert set(rep.details["resolve_rate"]) == {"none", "case", "location", "wrong", "gated", "oracle"}
    kinds = {c.kind for c in rep.claims}
    assert Kind.EMPIRICAL in kinds and Kind.CHECK in kinds
    assert all(c.rule is not None or c.verdict.value == "not checkable here" for c in rep.claims)
    # the repair agent's trust in reports is named as planted; every localizer claim shows every baseline
    assert rep.planted and Kind.PLANTED in kinds
    acc = [c for c in rep.claims if "acc@1 beats" in c.statement]
    assert len(acc) == 3 and all({b["name"] for b in c.baselines} == {"bm25", "ochiai", "surprisal"} for c in acc)
    case = next(c for c in rep.claims if c.statement.startswith("injecting the case file"))
    assert {b["name"] for b in case.baselines} == {"no report", "location only"}
    # the positive control (the gold location) is its own claim; when it does not fire no repair claim speaks
    control = next(c for c in rep.claims if c.statement.startswith("positive control"))
    if not control.ci[0] > 0:
        repair = [c for c in rep.claims if c is not control and ("resolve rate" in c.statement
                                                                 or "selective injection" in c.statement)]
        assert repair and all(c.verdict.value == "uninformative" for c in repair)
