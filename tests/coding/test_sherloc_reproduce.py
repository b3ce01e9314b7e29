"""Smoke-scale SHERLOC reproduction: claims are computed (not that the paper was matched)."""

import pytest

from divelab.claims import Kind
from divelab.coding.sherloc.reproduce import reproduce


@pytest.mark.slow
def test_smoke_reproduction_computes_claims():
    rep = reproduce("smoke", seed=0)
    loc = rep.details["localization"]
    assert set(loc) == {"sherloc", "bm25", "ochiai", "surprisal"}
    for name, by in loc.items():
        for g in ("file", "function", "line"):
            assert 0.0 <= by[g]["acc@1"] <= by[g]["recall@5"] <= 1.0, (name, g)
    assert rep.details["n_tasks"] >= 1
    assert set(rep.details["resolve_rate"]) == {"none", "case", "location", "wrong", "gated"}
    kinds = {c.kind for c in rep.claims}
    assert Kind.EMPIRICAL in kinds and Kind.CHECK in kinds
    assert all(c.rule is not None or c.verdict.value == "not checkable here" for c in rep.claims)
