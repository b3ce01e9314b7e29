"""The saved results (docs/results/, docs/results/full/) follow the evidence rules, claim by claim.

These are the files the README's headline and the documentation pages are generated from, so the
rules are checked on them directly: every verdict re-applies from its recorded rule, a zero-width
interval is never called noise, a bound or a chance level is read at the far end of its interval,
a comparative claim is judged against the strongest baseline it recorded, and a reproduction with
planted claims says what it plants.
"""

from pathlib import Path

import pytest

from divelab import verdicts
from divelab.claims import Kind, Verdict, strongest
from divelab.report import load_results
from divelab.report.render import RESULTS_VERSION

ROOT = Path(__file__).resolve().parents[2] / "docs" / "results"
# stability.json is the cross-ISA comparison (tools/cross_isa.py), not a run
QUICK = [p for p in sorted(ROOT.glob("*.json")) if p.name != "stability.json"]
FILES = QUICK + sorted((ROOT / "full").glob("*.json"))


def test_there_are_saved_results():
    assert len(QUICK) == 18, "docs/results should hold one quick run per system"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_saved_claims_follow_the_evidence_rules(path):
    import json

    assert json.loads(path.read_text())["divelab_results_version"] == RESULTS_VERSION, \
        f"{path.name} predates the current results format: re-run and re-save it"
    for rep in load_results(path):
        if any(c.kind is Kind.PLANTED for c in rep.claims):
            assert rep.planted.strip(), f"{rep.system}: planted claims but the set-up does not say what it plants"
        for c in rep.claims:
            where = f"{rep.system}: {c.statement}"
            if c.verdict is Verdict.NOT_CHECKABLE:
                assert c.measured is None and c.note, where
                continue
            again = verdicts.reapply(c.rule)
            assert (again.verdict, again.direction, again.size) == (c.verdict, c.direction, c.size), where
            args = c.rule["args"]
            ci = args.get("ci")
            if c.rule["name"] in ("direction", "value") and ci and ci[0] == ci[1] and not args.get("exact"):
                assert c.verdict is Verdict.UNINFORMATIVE, f"{where}: zero-width interval judged {c.verdict}"
            if c.rule["name"] == "bound":
                assert args.get("ci") is not None or args.get("exact"), f"{where}: a bound without an interval"
            if c.rule["name"] == "value" and args.get("chance") is not None:
                assert ci is not None, f"{where}: a chance level judged without an interval"
            if c.verdict is Verdict.UNINFORMATIVE:
                assert c.reason, f"{where}: uninformative without a reason"
            if c.baselines:
                assert c.compared_with == strongest(c.baselines, c.better)["name"], where
