"""The real-LLM table's competence column: every system with SmolLM2 claims in its saved full run says
where its competence is recorded, and each such entry resolves in that file."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from divelab.report import load_results
from divelab.report.competence import COMPETENCE, Measure, competence_text, value

FULL = Path(__file__).resolve().parents[2] / "docs" / "results" / "full"
REPS = {rep.system: rep for path in sorted(FULL.glob("*.json")) for rep in load_results(path)}
WITH_SMOLLM2 = sorted(k for k, rep in REPS.items() if any("smollm2" in c.statement.lower() for c in rep.claims))


def test_there_are_real_llm_results():
    assert WITH_SMOLLM2, "no saved full run has SmolLM2 claims: the check below would pass on nothing"


@pytest.mark.parametrize("key", WITH_SMOLLM2)
def test_each_real_llm_system_records_its_competence(key):
    assert key in COMPETENCE, f"{key} has SmolLM2 claims but no competence entry in divelab.report.competence"
    text = competence_text(key, REPS[key])  # raises when a named claim or details entry is missing
    assert all(m.label in text for m in COMPETENCE[key])


def test_a_measure_that_matches_no_claim_is_an_error():
    rep = SimpleNamespace(system="x", claims=[SimpleNamespace(statement="something else", measured=1.0, ci=None)],
                          details={})
    with pytest.raises(KeyError, match="0 claims"):
        value(Measure("m", claim="competence on"), rep)
    with pytest.raises(KeyError, match="no entry"):
        value(Measure("m", details="a/b"), rep)


def test_a_measure_needs_exactly_one_source():
    with pytest.raises(ValueError, match="exactly one"):
        Measure("m")
    with pytest.raises(ValueError, match="exactly one"):
        Measure("m", claim="a", details="b")


def test_details_values_render_with_interval_and_count():
    rep = SimpleNamespace(system="x", claims=[], details={"c": {"p": 0.25, "ci": [0.1, 0.4], "n": 8, "k": 2}})
    assert value(Measure("m", details="c/p", ci="c/ci"), rep) == "0.25 [0.10, 0.40]"
    assert value(Measure("m", details="c/k", of="c/n"), rep) == "2 of 8"
