"""Claims measured on public games or data, each beside the same comparison on our own games: which claims count
as public, how the home-grown counterpart is found, and that the report shows the pair (Markdown and HTML)."""

from __future__ import annotations

from divelab.claims import Claim, Kind, Reproduction, not_checkable
from divelab.report import public
from divelab.report.render import render_html, render_markdown
from divelab.verdicts import direction


def measured(statement: str, x: float) -> Claim:
    return Claim(statement=statement, paper_value="p", measured=x, ci=(x - 0.05, x + 0.05), kind=Kind.EMPIRICAL,
                 ruling=direction(x, (x - 0.05, x + 0.05), why="t"))


CLAIMS = [measured("Success (TextWorldExpress coin collector, held-out games): tree vs flat", 0.1),
          measured("Success (E163 mazes): tree vs flat", -0.3),
          measured("Success (TextWorld): tree vs flat", -0.2),
          measured("Success (TextWorld, gigpo for both arms): tree vs flat", -0.4),
          measured("an agent's accuracy on BFCL v4 questions", 0.05),
          not_checkable("accuracy on BFCL v4 questions", "9 points", "bfcl-eval is not installed"),
          measured("rho (with P(win|h), TextWorldExpress coin collector) at the end", 0.2),
          measured("rho (with P(win|h), TextWorld deterministic) at the end", 0.1),
          measured("rho (with P(win|h)) and (TextWorld) at the end", 0.1),
          measured("G2PO wins, on public games (TextWorldExpress coin collector)", 2.0),
          measured("G2PO wins (TextWorld games, over warm starts)", 1.0)]


def test_public_claims_pair_with_their_home_grown_comparison() -> None:
    got = public.pairs(CLAIMS)
    assert [c.statement for c, _ in got] == [CLAIMS[i].statement for i in (0, 4, 6, 9)]
    assert got[0][1] is CLAIMS[2]  # TextWorld preferred over the mazes; a longer label is another comparison
    assert got[1][1] is None
    assert got[2][1] is CLAIMS[7]  # a label with brackets of its own; two labels are not one swapped label
    assert got[3][1] is CLAIMS[10]  # ", on public games" before the label names the substrate too
    assert not public.is_public(CLAIMS[5])  # a benchmark it could not run is not a measurement on it
    assert public.pairs(CLAIMS[1:4]) == [] and public.side_by_side_md(CLAIMS[1:4]) == []


def test_the_report_shows_each_pair() -> None:
    rep = Reproduction(system="infotree", title="t", scale="full", seed=0)
    rep.claims = CLAIMS
    md = render_markdown([rep], figure_dir=None)
    side = md[md.index("Measured on public games or data"):]
    row = next(line for line in side.splitlines() if line.startswith("| Success (TextWorldExpress"))
    assert "Success (TextWorld): tree vs flat: -0.2" in row
    assert "no home-grown counterpart" in md
    html = render_html([rep])
    assert 'id="public-infotree"' in html and html.count("no home-grown counterpart") == 1
    rep.claims = CLAIMS[1:4]
    assert "public games" not in render_markdown([rep], figure_dir=None)


def test_humaneval_prompts_pair_with_the_corpus_prompts_at_the_same_block() -> None:
    """DSpark's τ gain on HumanEval prompts is public data; its counterpart is the held-out corpus prompts' claim at
    the same γ, not another γ's."""
    stmt = "semi-AR (Markov head) τ gain over the stronger baseline drafter at γ={g} ({label})"
    claims = [measured(stmt.format(g=4, label="held-out corpus prompts"), 0.1),
              measured(stmt.format(g=8, label="held-out corpus prompts"), -0.2),
              measured(stmt.format(g=8, label="HumanEval prompts"), 0.3),
              not_checkable(stmt.format(g=16, label="HumanEval prompts"), "p", "measured at the full scale only")]
    assert public.pairs(claims) == [(claims[2], claims[1])]
    assert not public.is_public(claims[1]) and not public.is_public(claims[3])
