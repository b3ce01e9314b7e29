"""Several seeds aggregated into one set of claims, in process."""

import json

import pytest
from typer.testing import CliRunner

from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction
from divelab.cli import app
from divelab.scaleout import aggregate_seeds, parse_seeds


def test_parse_seeds_ranges_lists_and_errors():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,3,7-8") == [0, 3, 7, 8]
    for bad, msg in [("a-b", "not a seed or a range"), ("4-2", "runs backwards"), ("1,1", "twice"),
                     ("0-5000", "at most")]:
        with pytest.raises(ValueError, match=msg):
            parse_seeds(bad)


def _rep(seed: int, effect: float, passed: bool) -> Reproduction:
    rep = Reproduction(system="x", title="x", scale="smoke", seed=seed)
    rep.add(Claim("gain", "+0.2", effect, kind=Kind.EMPIRICAL,
                  ruling=verdicts.direction(effect, (effect - 0.5, effect + 0.5), paper=0.2)))
    rep.add(Claim("test", "yes", str(passed), kind=Kind.EMPIRICAL, ruling=verdicts.outcome(passed, test="t")))
    rep.add(Claim("search", "found", 1.0 if passed else 0.0, kind=Kind.CHECK, ruling=verdicts.found(int(passed), 5)))
    return rep


def test_aggregate_reapplies_each_rule_across_seeds():
    # single runs are each "not separated" (their own CIs are wide); across seeds the effect is tight
    agg = aggregate_seeds([_rep(s, 0.2 + 0.01 * s, s != 1) for s in range(3)])
    gain, test, search = agg.claims
    assert gain.measured == pytest.approx(0.21) and gain.ci[0] < 0.21 < gain.ci[1]
    assert gain.verdict.value == "reproduced" and gain.rule["args"]["ci"][0] > 0
    assert test.verdict.value == "reproduced" and "passed in 2/3" in test.rule["args"]["test"]
    assert search.rule["args"] == {"count": 2, "trials": 15}
    for c in agg.claims:
        assert verdicts.reapply(c.rule).verdict is c.verdict
    assert "seed 1:" in gain.note and agg.details["seeds"] == [0, 1, 2]


def test_aggregate_refuses_mismatched_runs():
    a, b = _rep(0, 0.2, True), _rep(1, 0.2, True)
    b.claims.pop()
    with pytest.raises(ValueError, match="missing from 1 of the 2 seeds"):
        aggregate_seeds([a, b])


def test_cli_seeds_aggregates_in_process(fake_system, tmp_path):
    res = CliRunner().invoke(app, ["reproduce", "fake", "--scale", "smoke", "--seeds", "0-2", "--out", str(tmp_path)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "results.json").read_text())["reproductions"][0]
    first = rep["claims"][0]
    assert first["measured"] == pytest.approx(2.0)  # the fake measures 1 + seed
    assert first["ci"][0] < 2.0 < first["ci"][1] and "Mean over 3 seeds" in first["note"]
