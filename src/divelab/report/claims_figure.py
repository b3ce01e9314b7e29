"""Every system's headline comparison as a figure, drawn from its claims alone.

One row per empirical claim with a numeric measurement: our value with its interval, coloured by
verdict, and the paper's value (a point or a range) where the paper states one number in the
claim's own unit. Drawn by the report for every system, so a system without figures of its own
still shows what it measured against what the paper says.
"""

from __future__ import annotations

import re
import textwrap

from divelab.claims import Claim, Figure, Kind, Reproduction

MAX_ROWS = 12
VERDICT_COLOUR = {
    "reproduced": "#1f8a3b", "direction holds": "#5aa469", "direction only": "#c99a06",
    "not separated from noise": "#6b4fbb", "not reproduced": "#c0392b", "uninformative": "#8d7a55",
    "not checkable here": "#6b7280",
}
_NUM = r"[+\-−]?\d[\d,]*(?:\.\d+)?"
# The paper's value as the start of its text: "0.87 (review)", "+16–18 % at γ=7", "2.42x (L1)", "~50 (...)".
_PAPER = re.compile(rf"^\s*(?:[~≈]\s*)?(?P<a>{_NUM})(?:\s*[–-]\s*(?P<b>{_NUM}))?\s*(?P<unit>%|x\b|×|pp\b|points?\b)?"
                    r"(?P<rest>.*)$", re.S)


def _unit_class(unit: str) -> str:
    u = unit.strip().lower()
    if u.startswith("%"):
        return "%"
    if u.startswith(("point", "pp")):
        return "points"
    if u in ("x", "×") or u.startswith(("x ", "× ")):
        return "x"
    return ""


def paper_number(claim: Claim) -> tuple[float, float] | None:
    """The paper's value (low, high) when its text starts with one number or range in the claim's
    unit and says nothing else comparative ("66.1 vs 65.5" is not one number); else None."""
    m = _PAPER.match(claim.paper_value)
    if m is None or re.search(r"\bvs\b|→|->|/", claim.paper_value):
        return None
    rest = m.group("rest").strip()
    if rest and not rest.startswith(("(", ",", ";", "at ", "on ", "in ")):
        return None
    if (m.group("unit") and {"pp": "points", "point": "points", "points": "points", "×": "x"}.get(
            m.group("unit"), m.group("unit"))) != (_unit_class(claim.unit) or None):
        return None

    def num(s: str) -> float:
        return float(s.replace("−", "-").replace(",", ""))

    a = num(m.group("a"))
    b = num(m.group("b")) if m.group("b") else a
    if m.group("b") and a > 0 and not m.group("b").startswith(("+", "-", "−")):
        b = abs(b)  # "+16–18 %": the dash is a range, not a sign
    return (min(a, b), max(a, b))


def plotted_claims(rep: Reproduction) -> list[Claim]:
    return [c for c in rep.claims if c.kind is Kind.EMPIRICAL and isinstance(c.measured, int | float)
            and not isinstance(c.measured, bool)][:MAX_ROWS]


def claims_figure(rep: Reproduction) -> Figure | None:
    """The figure, or None when no empirical claim has a number."""
    claims = plotted_claims(rep)
    if not claims:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(claims), 1, figsize=(8.5, 0.95 * len(claims) + 0.5), squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, c in zip(axes[:, 0], claims, strict=True):
        colour = VERDICT_COLOUR.get(c.verdict.value, "#333333")
        x = float(c.measured)
        lo, hi = c.ci if c.ci is not None else (x, x)
        ax.errorbar([x], [0], xerr=[[max(x - lo, 0)], [max(hi - x, 0)]], fmt="o", color=colour, capsize=4,
                    label="ours (95% interval)")
        paper = paper_number(c)
        span = [lo, hi, x]
        if paper is not None:
            if paper[0] == paper[1]:
                ax.plot([paper[0]], [0], marker="D", color="black", fillstyle="none", markersize=8, linestyle="",
                        label="paper")
            else:
                ax.axvspan(paper[0], paper[1], color="#999999", alpha=0.25, label="paper (range)")
            span += list(paper)
        left, right = min(span), max(span)
        pad = (right - left) * 0.15 or max(abs(right), 1.0) * 0.1
        ax.set_xlim(left - pad, right + pad)
        if left - pad < 0 < right + pad:
            ax.axvline(0, color="#bbbbbb", linewidth=0.8, zorder=0)
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
        title = textwrap.shorten(c.statement, 95, placeholder="…")
        ax.set_title(f"{title}  [{c.verdict.value}]", fontsize=8, loc="left", color=colour)
        ax.tick_params(axis="x", labelsize=7)
        if c.unit:
            ax.set_xlabel(textwrap.shorten(c.unit, 60, placeholder="…"), fontsize=7, labelpad=1)
    handles = {}
    for ax in axes[:, 0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="upper right", fontsize=7, ncol=3, frameon=False)
    height = 0.95 * len(claims) + 0.5
    # fixed margins in inches: tight_layout would measure every label (seconds for twelve rows)
    fig.subplots_adjust(left=0.03, right=0.98, top=1 - 0.55 / height, bottom=0.45 / height, hspace=1.25)
    more = len([c for c in rep.claims if c.kind is Kind.EMPIRICAL]) - len(claims)
    caption = ("Each empirical claim with a number: ours with its 95% interval, coloured by verdict; the paper's "
               "value (◇, or a grey band for a range) where the paper gives one number in the same unit."
               + (f" {more} more empirical claim(s) are in the table." if more > 0 else ""))
    return Figure.from_matplotlib(fig, "headline-claims", caption, dpi=80)
