import json

import pytest

from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction, Verdict, not_checkable


def _claim(**kw):
    base = dict(statement="x", paper_value="1", measured=1.0, kind=Kind.EMPIRICAL,
                ruling=verdicts.value(1.0, paper=1.0, exact=True))
    base.update(kw)
    return Claim(**base)


def test_claim_takes_its_verdict_from_the_ruling_and_records_the_rule():
    c = _claim()
    assert c.verdict is Verdict.REPRODUCED and c.rule["name"] == "value" and c.size == "agrees"
    assert verdicts.reapply(c.rule).verdict is c.verdict


def test_claim_rejects_hand_verdicts_unknown_kinds_and_disagreement():
    with pytest.raises(ValueError, match="must come from a rule"):
        Claim("x", "1", 1.0, Verdict.REPRODUCED, kind=Kind.EMPIRICAL)
    with pytest.raises(ValueError, match="has no kind"):
        Claim("x", "1", 1.0, ruling=verdicts.value(1.0, paper=1.0, exact=True))
    with pytest.raises(ValueError, match="allowed: check, by construction, planted, empirical"):
        _claim(kind="obvious")
    with pytest.raises(ValueError, match="disagrees with its ruling"):
        _claim(verdict=Verdict.NOT_REPRODUCED)
    with pytest.raises(ValueError, match="no verdict"):
        Claim("x", "1", 1.0, kind=Kind.CHECK)


def test_not_checkable_requires_reason():
    with pytest.raises(ValueError, match="gives no reason"):
        Claim("x", "1", None, Verdict.NOT_CHECKABLE, kind=Kind.EMPIRICAL)
    c = not_checkable("x", "30%", "needs a live model endpoint")
    assert c.measured is None and c.verdict is Verdict.NOT_CHECKABLE and "endpoint" in c.note
    assert c.kind is Kind.EMPIRICAL


def test_nan_measured_is_rejected():
    with pytest.raises(ValueError, match="NaN"):
        verdicts.value(float("nan"), paper=1.0, exact=True)


def test_measured_text_formats_unit_and_ci():
    c = _claim(measured=0.12345, unit="%", ci=(0.1, 0.15))
    assert c.measured_text() == "0.123 % [0.1, 0.15]"
    assert not_checkable("x", "1", "n").measured_text() == "—"


def test_reproduction_round_trips_through_json_and_tallies_empirical_only():
    rep = Reproduction(system="backtrack", title="t", scale="smoke", seed=3)
    rep.add(_claim(measured=2.0, ci=(1.0, 3.0), source="§2", ruling=verdicts.value(2.0, paper=1.0, exact=True)))
    rep.add(_claim(kind=Kind.CHECK, ruling=verdicts.bound(1e-12, 1e-9, exact=True)))
    rep.add(not_checkable("b", "2", "why"))
    rep.details["table"] = {"k": [1, 2]}
    back = Reproduction.from_dict(json.loads(rep.to_json()))
    assert back.to_dict() == rep.to_dict()
    assert back.verdict_counts() == {"reproduced": 0, "direction holds": 0, "direction only": 0,
                                     "positive, not counted": 0, "not separated from noise": 0,
                                     "not reproduced": 1, "uninformative": 0, "not checkable here": 1}
    assert back.verdict_counts(None)["reproduced"] == 1
    assert back.kind_counts() == {"check": 1, "by construction": 0, "planted": 0, "empirical": 2}


def test_a_positive_empirical_verdict_counts_only_with_its_audit_trail():
    """Falsifier, negative control and replication unit: without all three the tally lists it apart."""
    ctl = verdicts.control("labels shuffled", 0.0, (-0.05, 0.05))
    bare = Claim("a beats b", "+0.2", 0.2, kind=Kind.EMPIRICAL, ci=(0.1, 0.3),
                 ruling=verdicts.direction(0.2, (0.1, 0.3), paper=0.2))
    assert bare.audit_gaps() == ["no falsifier", "no negative control", "no replication unit"]
    assert bare.tally_key == "positive, not counted" and "not counted" in bare.audit_text()
    full = Claim("a beats b", "+0.2", 0.2, kind=Kind.EMPIRICAL, ci=(0.1, 0.3),
                 ruling=verdicts.direction(0.2, (0.1, 0.3), paper=0.2, control=ctl),
                 falsifier="b scoring as high as a on held-out games would refute it",
                 replication={"unit": "training runs", "n": 3})
    assert full.audit_gaps() == [] and full.tally_key == "reproduced"
    assert "negative control (labels shuffled): 0 [-0.05, 0.05], no effect" in full.audit_text()
    assert full.replication == {"unit": "training runs", "n": 3, "clustered_by": ""}
    rep = Reproduction(system="x", title="t", scale="quick", seed=0, claims=[bare, full])
    counts = rep.verdict_counts()
    assert counts["reproduced"] == 1 and counts["positive, not counted"] == 1
    assert Reproduction.from_dict(json.loads(rep.to_json())).verdict_counts() == counts
    # a negative verdict has nothing to audit, and other kinds never count
    no = Claim("a beats b", "+0.2", -0.2, kind=Kind.EMPIRICAL, ruling=verdicts.direction(-0.2, (-0.3, -0.1), paper=0.2))
    assert no.audit_gaps() == []
    with pytest.raises(ValueError, match="replication must be"):
        Claim("x", "1", 1.0, kind=Kind.EMPIRICAL, ruling=verdicts.value(1.0, paper=1.0, exact=True),
              replication={"unit": "runs", "n": 0})
