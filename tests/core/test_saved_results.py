"""The saved results (docs/results/, docs/results/full/) follow the evidence rules, claim by claim.

These are the files the README's headline and the documentation pages are generated from, so the
rules are checked on them directly: every verdict re-applies from its recorded rule, a zero-width
interval is never called noise, a value or a bound is judged with its interval, a chance level is a
named exact constant and never a baseline's point estimate, a comparative claim is judged against
the strongest baseline it recorded (and its statement does not name which one that was: that is
measured), one measurement is one claim, and a reproduction with planted claims says what it plants.
Each check is shown able to fail on a claim built to break it.

A full-scale result saved under the earlier rules (format 3) is still read: it is listed, and its
positive verdicts, which carry no falsifier or negative control, are not counted in the headline.
"""

import json
from pathlib import Path

import pytest

from divelab import verdicts
from divelab.claims import NOT_COUNTED, Claim, Kind, Reproduction, Verdict, strongest
from divelab.report import load_results
from divelab.report.render import READABLE_VERSIONS, RESULTS_VERSION

ROOT = Path(__file__).resolve().parents[2] / "docs" / "results"
# stability.json is the cross-ISA comparison (tools/cross_isa.py), not a run
QUICK = [p for p in sorted(ROOT.glob("*.json")) if p.name != "stability.json"]
FULL = sorted((ROOT / "full").glob("*.json"))


def problems(rep: Reproduction) -> list[str]:
    """Every way a reproduction judged under the current rules breaks them ([] when it follows them)."""
    out = []
    if any(c.kind is Kind.PLANTED for c in rep.claims) and not rep.planted.strip():
        out.append("planted claims but the set-up does not say what it plants")
    seen: dict[tuple, str] = {}
    measured = {json.dumps(c.measured) for c in rep.claims if isinstance(c.measured, int | float)}
    for c in rep.claims:
        where = c.statement
        if c.verdict is Verdict.NOT_CHECKABLE:
            if c.measured is not None or not c.note:
                out.append(f"{where}: not checkable needs no value and a reason")
            continue
        try:
            again = verdicts.reapply(c.rule)
        except (TypeError, ValueError) as exc:
            out.append(f"{where}: its recorded rule no longer applies: {exc}")
            continue
        if (again.verdict, again.direction, again.size) != (c.verdict, c.direction, c.size):
            out.append(f"{where}: recorded {c.verdict.value}, its rule gives {again.verdict.value}")
        args = c.rule["args"]
        ci = args.get("ci")
        if c.rule["name"] in ("direction", "value") and ci and ci[0] == ci[1] and not args.get("exact") \
                and c.verdict is not Verdict.UNINFORMATIVE:
            out.append(f"{where}: zero-width interval judged {c.verdict.value}")
        if c.rule["name"] == "value" and args.get("chance") is not None:
            chance = json.dumps(float(args["chance"]))
            if chance in {json.dumps(float(b["value"])) for b in c.baselines} or (
                    chance in measured and float(args["chance"]) not in (0.0, 0.5)):
                out.append(f"{where}: chance={args['chance']} is a measured value, not an exact constant")
        if c.verdict is Verdict.UNINFORMATIVE and not c.reason:
            out.append(f"{where}: uninformative without a reason")
        if c.baselines and c.compared_with != strongest(c.baselines, c.better)["name"]:
            out.append(f"{where}: not judged against its strongest baseline")
        # which baseline is strongest is measured: named in the statement, the claim would change identity
        # between machines (and between runs), so it belongs in compared_with and the note
        if len(c.baselines) > 1 and c.compared_with and f"({c.compared_with})" in c.statement:
            out.append(f"{where}: the statement names the measured strongest baseline ({c.compared_with})")
        # two floors that tie (both uninformative, counted nowhere) are not one measurement told twice
        if c.kind is Kind.EMPIRICAL and isinstance(c.measured, int | float) and c.verdict is not Verdict.UNINFORMATIVE:
            key = (json.dumps(c.measured), json.dumps(list(c.ci) if c.ci else None), c.unit)
            if key in seen:
                out.append(f"{where}: the same measurement as {seen[key]!r} (one measurement, one claim)")
            seen[key] = where
    return out


def test_there_are_saved_results():
    assert len(QUICK) == 18, "docs/results should hold one quick run per system"
    assert FULL, "docs/results/full should hold the full-scale runs"


@pytest.mark.parametrize("path", QUICK + FULL, ids=lambda p: str(p.relative_to(ROOT)))
def test_saved_claims_follow_the_evidence_rules(path):
    version = json.loads(path.read_text())["divelab_results_version"]
    assert version in READABLE_VERSIONS, f"{path.name}: results format {version} is no longer read"
    if path in QUICK:
        assert version == RESULTS_VERSION, f"{path.name} predates the current rules: re-run and re-save it"
    for rep in load_results(path):
        if rep.rules_version < RESULTS_VERSION:
            # judged under the earlier rules: read as recorded, and none of its positives counts
            positives = [c for c in rep.claims if c.kind is Kind.EMPIRICAL and c.verdict in verdicts.POSITIVE]
            assert all(c.tally_key == NOT_COUNTED for c in positives), rep.system
            continue
        assert problems(rep) == [], f"{rep.system}:\n" + "\n".join(problems(rep))


def _rep(*claims: Claim, planted: str = "") -> Reproduction:
    return Reproduction(system="x", title="t", scale="quick", seed=0, claims=list(claims), planted=planted)


def _claim(statement="a beats b", measured=0.2, ci=(0.1, 0.3), **kw) -> Claim:
    kw.setdefault("ruling", verdicts.direction(measured, ci, paper=0.2))
    return Claim(statement, "+0.2", measured, kind=kw.pop("kind", Kind.EMPIRICAL), ci=ci, **kw)


def _breaks(rep: Reproduction, match: str) -> None:
    found = problems(rep)
    assert any(match in p for p in found), found


def test_the_saved_results_check_can_fail():
    assert problems(_rep(_claim())) == []
    # a verdict written by hand over its rule
    c = _claim()
    c.verdict = Verdict.NOT_REPRODUCED
    _breaks(_rep(c), "its rule gives reproduced")
    # a rule that the current rules refuse: a sampled value without its interval
    c = _claim(ruling=verdicts.value(0.2, paper=0.2, exact=True))
    c.rule["args"]["exact"] = False
    _breaks(_rep(c), "no longer applies")
    # chance taken from a baseline's point estimate
    c = _claim(measured=0.8, ci=(0.7, 0.9), baselines=[{"name": "random pick", "value": 0.62}], better="higher",
               compared_with="random pick",
               ruling=verdicts.value(0.8, ci=(0.7, 0.9), chance=0.62, chance_why="random pick", why="n"))
    _breaks(_rep(c), "is a measured value")
    # the statement names which baseline turned out strongest
    two = [{"name": "random pick", "value": 0.5}, {"name": "first", "value": 0.6}]
    _breaks(_rep(_claim("a beats the strongest (first)", baselines=two, better="higher", compared_with="first")),
            "names the measured strongest baseline")
    assert problems(_rep(_claim("a beats the strongest of two", baselines=two, better="higher",
                                compared_with="first"))) == []
    # one measurement, two claims
    _breaks(_rep(_claim("a beats b"), _claim("a beats b again")), "one measurement, one claim")
    tie = dict(measured=0.0, ci=(0.0, 0.0), ruling=verdicts.direction(0.0, (0.0, 0.0), paper=0.2))
    assert problems(_rep(_claim("floor one", **tie), _claim("floor two", **tie))) == []
    # planted without saying what
    _breaks(_rep(_claim(kind=Kind.PLANTED)), "does not say what it plants")
    # uninformative without a reason
    c = _claim()
    c.verdict, c.rule = Verdict.UNINFORMATIVE, {"name": "uninformative", "args": {"reason": " "}}
    _breaks(_rep(c), "no longer applies")
