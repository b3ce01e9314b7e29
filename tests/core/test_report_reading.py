"""The report as a reader meets it: a figure per system, its own system first, sources a reader can
follow, no Python reprs, and smoke numbers labelled as no evidence."""

import json
from pathlib import Path

import pytest

from divelab import verdicts
from divelab.claims import Claim, Kind, Reproduction
from divelab.report import render_html, render_markdown
from divelab.report.claims_figure import claims_figure, paper_number
from divelab.report.text import cite, md_cell, plain

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _rep(scale="quick", note="", source="", paper="0.87 (review)", unit=""):
    rep = Reproduction(system="sherloc", title="t", scale=scale, seed=0)
    rep.add(Claim("accuracy", paper, 0.8, ci=(0.7, 0.9), unit=unit, kind=Kind.EMPIRICAL, note=note, source=source,
                  ruling=verdicts.value(0.8, paper=0.87, tol=0.1, exact=True)))
    return rep


@pytest.mark.parametrize("paper, unit, want", [
    ("0.87 (review; unverified)", "", (0.87, 0.87)),
    ("+16–18 % at γ=7", "%", (16.0, 18.0)),
    ("2.42x (KernelBench L1, GPU)", "x", (2.42, 2.42)),
    ("0.84–0.95 (4 models)", "AUROC", (0.84, 0.95)),
    ("30% mean violation after one compaction", "share of rules", None),  # another unit
    ("66.1 vs 65.5 (+0.6 points)", "success", None),  # two numbers
    ("up to +6.6 points", "points", None),  # not a value
    ("112 / 8 min = 14x", "x", None),
])
def test_paper_number_is_read_only_when_it_is_one_number_in_the_claims_unit(paper, unit, want):
    assert paper_number(_rep(paper=paper, unit=unit).claims[0]) == want


def test_a_system_without_figures_of_its_own_gets_its_claims_drawn():
    rep = _rep()
    assert not rep.figures and claims_figure(rep) is not None
    html = render_html([rep])
    assert 'class="claims-figure"' in html.split('id="sys-sherloc"', 1)[1]
    no_numbers = Reproduction(system="sherloc", title="t", scale="quick", seed=0)
    assert claims_figure(no_numbers) is None


def test_a_one_system_report_opens_on_its_own_system():
    html = render_html([_rep()])
    summary = html.split('<table id="summary">', 1)[1].split("</table>", 1)[0]
    first_row = summary.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert 'href="#sys-sherloc"' in first_row


def test_smoke_reports_say_first_that_smoke_numbers_are_not_evidence():
    for render in (render_html, render_markdown):
        smoke = render([_rep(scale="smoke")])
        head = smoke[:smoke.find("sys-sherloc") if "sys-sherloc" in smoke else 2000]
        assert "Smoke scale" in head and "not evidence for or against any paper" in head
        assert "Smoke scale" not in render([_rep(scale="quick")])


def test_notes_show_no_python_reprs_and_sources_cite_the_paper():
    note = "per strategy: {'ttb': '2/2', 'wadd': '1/2'}; picks ['mean/min', 'last/last']; see details['a']['b']"
    rep = _rep(note=note, source="agents-coding-safety.md §E169; week-in-review E169")
    for text in (render_html([rep]), render_markdown([rep], figure_dir=None)):
        assert "{'" not in text and "['" not in text and "\\['" not in text
        assert "ttb 2/2" in text and "mean/min, last/last" in text and "details → a → b" in text
        assert "arXiv 2606.24820" in text and ".md" not in text


def test_every_saved_source_cites_the_paper_not_internal_files():
    seen = 0
    for path in [p for p in sorted(RESULTS.glob("*.json")) if p.name != "stability.json"]:  # not a run
        for rep in json.loads(path.read_text())["reproductions"]:
            for c in rep["claims"]:
                if not c["source"]:
                    continue
                seen += 1
                text = cite(rep["system"], c["source"])
                assert text.startswith(("arXiv ", "divelab's own")), text
                for internal in (".md", "notes", "issue", "paperdive", "§E", "[V]", "[S]", "plan"):
                    assert internal not in text, (c["source"], text)
    assert seen > 100


def test_markdown_cells_escape_brackets_and_pipes():
    assert md_cell("E[4q(1−q)] [0.05, 0.2] | x") == "E\\[4q(1−q)\\] \\[0.05, 0.2\\] \\| x"
    assert plain("no literal here: [x") == "no literal here: [x"
