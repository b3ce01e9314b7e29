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


def _method_rep(seed: int, effect: float, tie: bool) -> Reproduction:
    rep = Reproduction(system="x", title="x", scale="smoke", seed=seed)
    ruling = (verdicts.direction(0.0, (0.0, 0.0), paper=0.2) if tie
              else verdicts.direction(effect, (effect - 0.05, effect + 0.05), paper=0.2, training_runs=1))
    rep.add(Claim("method gain", "+0.2", 0.0 if tie else effect, kind=Kind.EMPIRICAL, ruling=ruling,
                  baselines=[{"name": "a", "value": 0.1 * seed, "ci": None}, {"name": "b", "value": 0.3, "ci": None}],
                  better="higher", compared_with="b" if 0.1 * seed < 0.3 else "a"))
    rep.add(Claim("rate", "<=5%", 0.02, kind=Kind.EMPIRICAL, ruling=verdicts.bound(0.02, 0.05, ci=(0.0, 0.04))))
    return rep


def test_seeds_replicate_the_training_run_and_uninformative_seeds_do_not_vote():
    # one training run per seed cannot carry a method claim; three seeds are three training runs
    agg = aggregate_seeds([_method_rep(s, e, False) for s, e in zip([0, 1, 2], [0.18, 0.22, 0.2], strict=True)])
    gain = agg.claims[0]
    assert gain.rule["args"]["training_runs"] == 3 and gain.verdict is verdicts.Verdict.REPRODUCED
    assert gain.compared_with == "b" and {b["name"] for b in gain.baselines} == {"a", "b"}
    assert agg.claims[1].rule["args"]["ci"] is not None  # a bound across seeds reads the seeds' interval
    # a seed at an exact tie is left out, and the note says so
    agg = aggregate_seeds([_method_rep(0, 0.2, True), _method_rep(1, 0.2, False), _method_rep(2, 0.21, False)])
    assert "1 of 3 seeds were uninformative" in agg.claims[0].note
    agg = aggregate_seeds([_method_rep(s, 0, True) for s in range(2)])
    assert agg.claims[0].verdict is verdicts.Verdict.UNINFORMATIVE
