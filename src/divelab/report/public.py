"""Which claims were measured on public games or data (no one here wrote them), and the same comparison on the
system's own substrate beside each: what the report, the README and the system pages show side by side.

A claim is on a public substrate when it has a measured value and its statement names one of
:data:`PUBLIC_SUBSTRATES` (a claim that only names a benchmark it could not run has no measured value). Its
home-grown counterpart is the claim whose statement is the same with the parenthesised substrate label swapped
for one of ours, ``(TextWorld)`` preferred: "Success ... (TextWorldExpress coin collector, held-out games)"
beside "Success ... (TextWorld)", or "τ gain ... at γ=8 (HumanEval prompts)" beside "τ gain ... at γ=8 (held-out
corpus prompts)".
"""

from __future__ import annotations

from collections.abc import Sequence

from divelab.claims import Claim
from divelab.report.text import md_cell

_ON_PUBLIC = ", on public games"  # a phrase some statements put before their public label
PUBLIC_SUBSTRATES = ("TextWorldExpress", "ScienceWorld", "public games", "BFCL v4", "HumanEval")


def _groups(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each outermost balanced parenthesised group of ``text`` (end is past its ")"); a label
    may hold brackets of its own, as in "(Spearman rho with P(win|h,a), TextWorld deterministic)"."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            start, depth = (i if depth == 0 else start), depth + 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, i + 1))
    return out


def is_public(c: Claim) -> bool:
    return c.measured is not None and any(name in c.statement for name in PUBLIC_SUBSTRATES)


def home_grown(c: Claim, claims: Sequence[Claim]) -> Claim | None:
    """``c``'s counterpart among ``claims`` on a home-grown substrate, or None (see the module docstring)."""
    m = next(((a, b) for a, b in _groups(c.statement) if any(n in c.statement[a:b] for n in PUBLIC_SUBSTRATES)),
             None)
    if m is None:
        return None
    head, tail = c.statement[:m[0]], c.statement[m[1]:]
    if head.endswith(_ON_PUBLIC + " "):  # "..., on public games (X)" is the same comparison as "... (ours)"
        head = head[:-len(_ON_PUBLIC) - 1] + " "

    def swapped(o: Claim) -> bool:  # o is c with that one label replaced by another whole label
        s = o.statement
        return (o is not c and not is_public(o) and s.startswith(head + "(") and s.endswith(")" + tail)
                and (len(head), len(s) - len(tail)) in _groups(s))

    found = [o for o in claims if swapped(o)]
    return next((o for o in found if o.statement == f"{head}(TextWorld){tail}"), found[0] if found else None)


def pairs(claims: Sequence[Claim]) -> list[tuple[Claim, Claim | None]]:
    """Every public claim with its home-grown counterpart (None where the system has none)."""
    return [(c, home_grown(c, claims)) for c in claims if is_public(c)]


def side_by_side_md(claims: Sequence[Claim]) -> list[str]:
    """A Markdown table of :func:`pairs` (empty when there is no public claim), for a system's section."""
    rows = pairs(claims)
    if not rows:
        return []
    lines = ["| On public games or data | Ours | Verdict | Same comparison on our own games | Verdict there |",
             "|---|---|---|---|---|"]
    for c, h in rows:
        lines.append(f"| {md_cell(c.statement)} | {md_cell(c.measured_text())} | **{c.verdict.value}** | "
                     + (f"{md_cell(h.statement)}: {md_cell(h.measured_text())} | **{h.verdict.value}** |" if h else
                        "— (no home-grown counterpart) | — |"))
    return lines
