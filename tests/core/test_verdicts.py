"""The verdict rules: direction and size, and the cases the old rules got wrong."""

import pytest

from divelab import verdicts as V
from divelab.verdicts import Verdict


def test_direction_with_ci_covering_zero_is_not_separated_not_partly():
    r = V.direction(0.2, (-0.05, 0.3), paper=0.2)
    assert r.verdict is Verdict.NOT_SEPARATED and r.direction == "not separated"


def test_direction_holds_but_size_far_from_paper_is_direction_only():
    # +83% where the paper says +16-18%: the direction holds, the size does not agree.
    r = V.direction(0.83, (0.6, 1.0), paper=(0.16, 0.18), tol=0.5)
    assert r.verdict is Verdict.PARTLY and r.direction == "holds" and r.size == "differs"
    assert V.direction(0.2, (0.1, 0.3), paper=(0.16, 0.18), tol=0.5).verdict is Verdict.REPRODUCED


def test_direction_fails_and_expected_sign():
    assert V.direction(-0.2, (-0.3, -0.1), why="paper gives no number").verdict is Verdict.NOT_REPRODUCED
    assert V.direction(-0.2, (-0.3, -0.1), expected_sign=-1, why="n").verdict is Verdict.DIRECTION_HOLDS


def test_direction_requires_ci_or_exact_and_size_requires_paper_or_reason():
    with pytest.raises(ValueError, match="needs a confidence interval"):
        V.direction(0.1, paper=0.1)
    with pytest.raises(ValueError, match="must say why"):
        V.direction(0.1, (0.05, 0.2))
    assert V.direction(0.1, exact=True, why="paper gives no number").size.startswith("not comparable")


def test_value_with_chance_and_tolerances():
    r = V.value(0.93, paper=0.87, tol=0.05, tol_kind="abs", ci=(0.9, 0.95), chance=0.5, chance_why="a random scorer's AUROC")
    assert r.verdict is Verdict.PARTLY  # better than chance, outside 0.82-0.92
    assert V.value(0.55, paper=0.87, ci=(0.45, 0.65), chance=0.5, chance_why="a random scorer's AUROC").verdict is Verdict.NOT_SEPARATED
    assert V.value(0.3, paper=0.87, ci=(0.2, 0.4), chance=0.5, chance_why="a random scorer's AUROC").verdict is Verdict.NOT_REPRODUCED
    assert V.value(0.8, paper=0.82, exact=True).verdict is Verdict.REPRODUCED
    assert V.value(0.5, paper=0.82, exact=True).verdict is Verdict.NOT_REPRODUCED
    with pytest.raises(ValueError, match="nothing to judge"):
        V.value(0.5, why="no paper number", exact=True)


def test_bound_found_outcome():
    assert V.bound(0.004, 0.005, exact=True).verdict is Verdict.REPRODUCED
    assert V.bound(0.1, 0.005, exact=True).verdict is Verdict.NOT_REPRODUCED
    assert V.bound(3.0, 2.0, sense=">=", exact=True).verdict is Verdict.REPRODUCED
    # a search that finds nothing is not "partly" reproduced
    assert V.found(0, 200).verdict is Verdict.NOT_REPRODUCED
    assert V.found(3, 200).verdict is Verdict.REPRODUCED
    with pytest.raises(ValueError, match="count <= trials"):
        V.found(5, 2)
    with pytest.raises(ValueError, match="needs test"):
        V.outcome(True, test="")


@pytest.mark.parametrize("ruling", [
    V.direction(0.2, (0.1, 0.3), paper=(0.1, 0.2)), V.value(0.9, paper=0.8, chance=0.5, ci=(0.85, 0.95), chance_why="a random scorer's AUROC"),
    V.bound(1e-9, 1e-6, exact=True), V.found(0, 10), V.outcome(False, test="fit prefers linear"),
    V.bound(0.02, 0.05, ci=(0.0, 0.18)), V.direction(0.0, (0.0, 0.0), paper=0.3),
    V.uninformative("the positive control did not fire"), V.direction(0.2, (0.1, 0.3), why="n", training_runs=1),
])
def test_reapply_reproduces_every_rule(ruling):
    assert V.reapply(ruling.rule) == ruling


def test_a_rule_added_to_the_table_is_reapplied(monkeypatch):
    """A new rule is one entry in ``RULES``: ``reapply`` calls it with its recorded arguments."""

    def at_least_half(share: float, *, label: str) -> V.Ruling:
        ok = share >= 0.5
        return V.Ruling(Verdict.REPRODUCED if ok else Verdict.NOT_REPRODUCED, "holds" if ok else "fails", "n/a",
                        {"name": "at_least_half", "args": {"share": share, "label": label}})

    monkeypatch.setitem(V.RULES, "at_least_half", at_least_half)
    for share in (0.7, 0.2):
        ruling = at_least_half(share, label="a share")
        assert V.reapply(ruling.rule) == ruling


def test_reapply_rejects_unknown_rules():
    with pytest.raises(ValueError, match="allowed: direction, value, bound, found, outcome, uninformative"):
        V.reapply({"name": "vibes", "args": {}})


def test_reproduced_needs_the_size_direction_holds_when_the_paper_gives_none():
    assert V.direction(0.2, (0.1, 0.3), paper=0.2).verdict is Verdict.REPRODUCED
    r = V.direction(0.2, (0.1, 0.3), why="the paper reports no effect size")
    assert r.verdict is Verdict.DIRECTION_HOLDS and r.direction == "holds"
    assert V.value(0.8, ci=(0.7, 0.9), chance=0.5, why="no number", chance_why="a random scorer's AUROC").verdict is Verdict.DIRECTION_HOLDS


def test_zero_width_intervals_are_uninformative_not_noise():
    # an exact tie at a floor: [0, 0] is not an under-powered null
    r = V.direction(0.0, (0.0, 0.0), paper=0.1)
    assert r.verdict is Verdict.UNINFORMATIVE and "zero-width" in r.reason
    assert V.direction(1.0, (1.0, 1.0), why="n").verdict is Verdict.UNINFORMATIVE  # ceiling vs floor
    assert V.value(1.0, paper=0.9, ci=(1.0, 1.0)).verdict is Verdict.UNINFORMATIVE
    # an effect computed exactly (by enumeration) is not a sample: it is judged
    assert V.direction(0.5, exact=True, paper=0.5).verdict is Verdict.REPRODUCED


def test_bound_reads_the_far_end_of_the_interval():
    # 0 false alarms in 17 is not "<= 5%": Wilson's upper end is 18%
    assert V.bound(0.0, 0.05, ci=(0.0, 0.18)).verdict is Verdict.NOT_SEPARATED
    assert V.bound(0.01, 0.05, ci=(0.0, 0.04)).verdict is Verdict.REPRODUCED
    assert V.bound(0.3, 0.05, ci=(0.2, 0.4)).verdict is Verdict.NOT_REPRODUCED
    assert V.bound(2.5, 2.0, sense=">=", ci=(1.9, 3.1)).verdict is Verdict.NOT_SEPARATED
    with pytest.raises(ValueError, match="needs the measurement's interval"):
        V.bound(0.01, 0.05)


def test_value_against_chance_needs_an_interval():
    with pytest.raises(ValueError, match="needs the measurement's interval"):
        V.value(0.9, chance=0.5, why="n", chance_why="random scorer")
    with pytest.raises(ValueError, match="needs the measurement's interval"):
        V.value(0.9, paper=0.9)  # a sampled value is judged with its interval, by size too


def test_chance_is_an_exact_constant_named_by_the_claim():
    with pytest.raises(ValueError, match="chance_why"):
        V.value(0.9, ci=(0.8, 0.95), chance=0.62, why="n")


def test_a_yes_no_outcome_cannot_reproduce_a_stated_size():
    assert V.outcome(True, test="t").verdict is Verdict.REPRODUCED
    capped = V.outcome(True, test="t", paper_size="+14 points")
    assert capped.verdict is Verdict.DIRECTION_HOLDS and "cannot check" in capped.size
    assert V.outcome(False, test="t", paper_size="+14 points").verdict is Verdict.NOT_REPRODUCED
    assert V.reapply(capped.rule) == capped


CTL_SILENT = V.control("labels shuffled", 0.01, (-0.05, 0.07))
CTL_MOVES = V.control("labels shuffled", 0.2, (0.1, 0.3))


@pytest.mark.parametrize("make", [
    lambda c: V.direction(0.2, (0.1, 0.3), paper=0.2, control=c),
    lambda c: V.value(0.8, ci=(0.7, 0.9), chance=0.0, chance_why="no correlation", why="n", control=c),
])
def test_a_negative_control_that_shows_the_effect_makes_the_claim_uninformative(make):
    quiet, moved = make(CTL_SILENT), make(CTL_MOVES)
    assert quiet.verdict in V.POSITIVE and V.control_shows(quiet.rule) is False
    assert moved.verdict is Verdict.UNINFORMATIVE and "negative control (labels shuffled)" in moved.reason
    assert V.control_shows(moved.rule) is True
    assert V.reapply(moved.rule) == moved and V.reapply(quiet.rule) == quiet


def test_controls_of_the_other_rules():
    assert V.found(3, 10, control={"name": "sham target", "count": 2, "trials": 10}).verdict is Verdict.UNINFORMATIVE
    assert V.found(3, 10, control={"name": "sham target", "count": 0, "trials": 10}).verdict is Verdict.REPRODUCED
    assert V.outcome(True, test="t", control={"name": "no method", "passed": True}).verdict is Verdict.UNINFORMATIVE
    inside = V.value(0.8, paper=0.8, tol=0.05, tol_kind="abs", ci=(0.78, 0.82), control=V.control("sham", 0.8, (0.77, 0.83)))
    assert inside.verdict is Verdict.UNINFORMATIVE  # the sham lands in the paper's band as well
    assert V.bound(0.01, 0.05, ci=(0.0, 0.04), control=V.control("no-op", 0.01, (0.0, 0.03))).verdict \
        is Verdict.UNINFORMATIVE
    stated = V.direction(0.2, (0.1, 0.3), paper=0.2, control={"none": "no ingredient can be removed"})
    assert stated.verdict is Verdict.REPRODUCED and V.control_shows(stated.rule) is None
    with pytest.raises(ValueError, match="control= must be"):
        V.direction(0.2, (0.1, 0.3), paper=0.2, control={"effect": 1})


def test_wide_tolerances_must_say_why():
    with pytest.raises(ValueError, match="wider than ±50%"):
        V.direction(0.2, (0.1, 0.3), paper=0.2, tol=1.0)
    r = V.direction(0.2, (0.1, 0.3), paper=0.2, tol=1.0, tol_why="the paper's own runs vary by 2x")
    assert r.verdict is Verdict.REPRODUCED


def test_one_training_run_cannot_make_a_method_claim():
    r = V.direction(0.2, (0.1, 0.3), paper=0.2, training_runs=1)
    assert r.verdict is Verdict.NOT_SEPARATED and "one training run" in r.reason
    assert V.direction(0.2, (0.1, 0.3), paper=0.2, training_runs=3).verdict is Verdict.REPRODUCED


def test_uninformative_needs_a_reason():
    with pytest.raises(ValueError, match="needs reason"):
        V.uninformative("  ")
    assert V.uninformative("set-up failed: no exclusive feature is alive").text().startswith("uninformative")
