"""A positive verdict that moved when its run was repeated on other CPU kernels is not counted."""

from __future__ import annotations

from pathlib import Path

from divelab.claims import NOT_COUNTED, POSITIVE, Kind
from divelab.report import checks, load_results, render_html, render_markdown
from divelab.report.render import tallies_by_kind

SAVED = Path(__file__).resolve().parents[2] / "docs" / "results"


def _run_with_a_counted_positive():
    for path in sorted(SAVED.glob("*.json")):
        if path.name == "stability.json":
            continue
        rep = load_results(path)[0]
        for c in rep.claims:
            if c.kind is Kind.EMPIRICAL and c.verdict in POSITIVE and not c.audit_gaps():
                return rep, c
    raise AssertionError("no saved quick run has a counted positive to test with")


def _check(rep, statement: str, held: bool, commit: str | None = None) -> dict:
    return {"system": rep.system, "scale": rep.scale, "saved_commit": commit or rep.environment["commit"],
            "isa": "AVX2", "claims": [{"statement": statement, "same_verdict": held}]}


def test_a_positive_that_moved_on_other_kernels_is_not_counted():
    rep, claim = _run_with_a_counted_positive()
    before = tallies_by_kind([rep])["empirical"]
    moved = checks.moved([rep], [_check(rep, claim.statement, held=False)])
    assert moved == {rep.system: {claim.statement}}
    after = tallies_by_kind([rep], moved)["empirical"]
    assert after[claim.verdict.value] == before[claim.verdict.value] - 1
    assert after[NOT_COUNTED] == before[NOT_COUNTED] + 1
    assert checks.MOVED_NOTE in render_html([rep], moved=moved)
    assert checks.MOVED_NOTE in render_markdown([rep], figure_dir=None, moved=moved)


def test_a_held_verdict_or_a_check_of_an_earlier_save_changes_nothing():
    rep, claim = _run_with_a_counted_positive()
    assert checks.moved([rep], [_check(rep, claim.statement, held=True)]) == {}
    assert checks.moved([rep], [_check(rep, claim.statement, held=False, commit="0" * 12)]) == {}
    page = render_html([rep])
    assert checks.MOVED_NOTE not in page


def test_no_saved_checks_file_means_no_checks(tmp_path):
    assert checks.load_checks(tmp_path / "stability.json") == []
