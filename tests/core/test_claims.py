import json

import pytest

from divelab.claims import (
    Claim,
    Reproduction,
    Verdict,
    not_checkable,
    verdict_from_direction,
    verdict_from_interval,
    verdict_from_ratio,
)


def test_claim_accepts_verdict_strings_and_rejects_unknown():
    c = Claim("x", "1", 1.0, "reproduced")
    assert c.verdict is Verdict.REPRODUCED
    with pytest.raises(ValueError, match="allowed: reproduced, partly"):
        Claim("x", "1", 1.0, "great")


def test_not_checkable_requires_reason():
    with pytest.raises(ValueError, match="gives no reason"):
        Claim("x", "1", None, Verdict.NOT_CHECKABLE)
    c = not_checkable("x", "30%", "needs a live model endpoint")
    assert c.measured is None and c.verdict is Verdict.NOT_CHECKABLE and "endpoint" in c.note


def test_nan_measured_is_rejected():
    with pytest.raises(ValueError, match="NaN"):
        Claim("x", "1", float("nan"), Verdict.PARTLY)


def test_measured_text_formats_unit_and_ci():
    c = Claim("x", "1", 0.12345, Verdict.PARTLY, unit="%", ci=(0.1, 0.15))
    assert c.measured_text() == "0.123 % [0.1, 0.15]"
    assert Claim("x", "1", None, Verdict.NOT_CHECKABLE, note="n").measured_text() == "—"


def test_reproduction_round_trips_through_json():
    rep = Reproduction(system="backtrack", title="t", scale="smoke", seed=3)
    rep.add(Claim("a", "1", 2.0, Verdict.NOT_REPRODUCED, ci=(1.0, 3.0), source="§2"))
    rep.add(not_checkable("b", "2", "why"))
    rep.details["table"] = {"k": [1, 2]}
    back = Reproduction.from_dict(json.loads(rep.to_json()))
    assert back.to_dict() == rep.to_dict()
    assert back.verdict_counts() == {"reproduced": 0, "partly": 0, "not reproduced": 1, "not checkable here": 1}


@pytest.mark.parametrize(
    ("measured", "expected"),
    [(5.0, Verdict.REPRODUCED), (8.0, Verdict.PARTLY), (20.0, Verdict.NOT_REPRODUCED)],
)
def test_verdict_from_interval(measured, expected):
    assert verdict_from_interval(measured, 4, 6, partly_lo=2, partly_hi=10) is expected


def test_verdict_from_ratio_and_direction():
    assert verdict_from_ratio(0.8, 0.82) is Verdict.REPRODUCED
    assert verdict_from_ratio(0.5, 0.82) is Verdict.PARTLY
    assert verdict_from_ratio(0.1, 0.82) is Verdict.NOT_REPRODUCED
    assert verdict_from_direction(0.2, (0.05, 0.3)) is Verdict.REPRODUCED
    assert verdict_from_direction(0.2, (-0.05, 0.3)) is Verdict.PARTLY
    assert verdict_from_direction(-0.2, (-0.3, -0.1)) is Verdict.NOT_REPRODUCED
    assert verdict_from_direction(-0.2, (-0.3, -0.1), expected_sign=-1) is Verdict.REPRODUCED
