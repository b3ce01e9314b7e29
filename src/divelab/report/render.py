"""Report rendering. One section per system; a table of every claim with colour-coded verdicts.

The HTML is a single file: figures are embedded as base64 PNGs and the stylesheet is inline,
so the report opens offline in any browser.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from divelab.cache import atomic_write_bytes, atomic_write_text
from divelab.claims import VERDICT_VALUES, Reproduction

VERDICT_CLASS = {
    "reproduced": "v-ok",
    "partly": "v-partly",
    "not reproduced": "v-no",
    "not checkable here": "v-nc",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
 padding:0 1rem;color:#1d1f23;line-height:1.45}
h1{margin-bottom:.2rem} .meta{color:#555;font-size:.9rem}
table{border-collapse:collapse;width:100%;margin:1rem 0;font-size:.92rem}
th,td{border:1px solid #d5d8dc;padding:.4rem .55rem;vertical-align:top;text-align:left}
th{background:#f3f4f6}
.verdict{font-weight:600;white-space:nowrap;border-radius:4px;padding:.1rem .4rem}
.v-ok{background:#d8f5dd;color:#11632a}.v-partly{background:#fff1c2;color:#7a5a00}
.v-no{background:#fbd9d9;color:#8a1414}.v-nc{background:#e5e7eb;color:#374151}
figure{margin:1rem 0} figure img{max-width:100%;border:1px solid #e5e7eb}
figcaption{color:#444;font-size:.88rem}
.note{color:#444;font-size:.86rem} section{border-top:2px solid #e5e7eb;margin-top:2rem}
code{background:#f3f4f6;padding:0 .2rem}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _summary_counts(reps: list[Reproduction]) -> dict[str, int]:
    counts = {v: 0 for v in VERDICT_VALUES}
    for r in reps:
        for k, n in r.verdict_counts().items():
            counts[k] += n
    return counts


def _anchor(rep: Reproduction) -> str:
    return f"sys-{rep.system}"


def render_html(reps: list[Reproduction], title: str = "divelab reproduction report") -> str:
    counts = _summary_counts(reps)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p class='meta'>Generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))}. "
        + " · ".join(
            f"<span class='verdict {VERDICT_CLASS[v]}'>{_e(v)}: {n}</span>" for v, n in counts.items()
        )
        + "</p>",
        "<h2>Every claim</h2>",
        "<table id='claims'><thead><tr><th>System</th><th>Claim</th><th>Paper</th><th>Ours</th>"
        "<th>Verdict</th></tr></thead><tbody>",
    ]
    for rep in reps:
        for c in rep.claims:
            v = c.verdict.value
            parts.append(
                f"<tr><td><a href='#{_anchor(rep)}'>{_e(rep.system)}</a></td><td>{_e(c.statement)}</td>"
                f"<td>{_e(c.paper_value)}</td><td>{_e(c.measured_text())}</td>"
                f"<td><span class='verdict {VERDICT_CLASS[v]}'>{_e(v)}</span></td></tr>"
            )
    parts.append("</tbody></table>")
    for rep in reps:
        parts.append(f"<section id='{_anchor(rep)}'><h2>{_e(rep.title)}</h2>")
        parts.append(
            f"<p class='meta'>system <code>{_e(rep.system)}</code> · scale <code>{_e(rep.scale)}</code> · "
            f"seed {rep.seed} · ran {rep.runtime_s:.1f} s · "
            + ", ".join(f"{_e(k)} {_e(v)}" for k, v in rep.environment.items())
            + "</p>"
        )
        if rep.setup:
            parts.append(f"<p>{_e(rep.setup)}</p>")
        parts.append(
            "<table><thead><tr><th>Claim</th><th>Paper (source)</th><th>Ours</th><th>Verdict</th>"
            "<th>Note</th></tr></thead><tbody>"
        )
        for c in rep.claims:
            v = c.verdict.value
            src = f" <span class='note'>({_e(c.source)})</span>" if c.source else ""
            parts.append(
                f"<tr><td>{_e(c.statement)}</td><td>{_e(c.paper_value)}{src}</td>"
                f"<td>{_e(c.measured_text())}</td>"
                f"<td><span class='verdict {VERDICT_CLASS[v]}'>{_e(v)}</span></td>"
                f"<td class='note'>{_e(c.note)}</td></tr>"
            )
        parts.append("</tbody></table>")
        for f in rep.figures:
            parts.append(
                f"<figure><img alt='{_e(f.name)}' src='data:image/png;base64,{f.png_base64}'>"
                f"<figcaption>{_e(f.caption)}</figcaption></figure>"
            )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def render_markdown(reps: list[Reproduction], title: str = "divelab reproduction report",
                    figure_dir: str | None = "figures") -> str:
    counts = _summary_counts(reps)
    lines = [f"# {title}", "", " · ".join(f"{v}: {n}" for v, n in counts.items()), ""]
    for rep in reps:
        lines += [f"## {rep.title}", "",
                  f"system `{rep.system}` · scale `{rep.scale}` · seed {rep.seed} · ran {rep.runtime_s:.1f} s", ""]
        if rep.setup:
            lines += [rep.setup, ""]
        lines += ["| Claim | Paper | Ours | Verdict | Note |", "|---|---|---|---|---|"]
        for c in rep.claims:
            paper = c.paper_value + (f" ({c.source})" if c.source else "")
            lines.append(
                f"| {_md_cell(c.statement)} | {_md_cell(paper)} | {_md_cell(c.measured_text())} | "
                f"**{c.verdict.value}** | {_md_cell(c.note)} |"
            )
        lines.append("")
        if figure_dir is not None:
            for f in rep.figures:
                lines += [f"![{f.caption}]({figure_dir}/{rep.system}-{f.name}.png)", "", f"*{f.caption}*", ""]
    return "\n".join(lines)


def write_report(reps: list[Reproduction], out_dir: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``report.md`` (+ figure PNGs) and ``report.html`` into ``out_dir``.
    Each file is written atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = {"divelab_results_version": 1, "reproductions": [r.to_dict() for r in reps]}
    paths = {"json": out / "results.json", "markdown": out / "report.md", "html": out / "report.html"}
    atomic_write_text(paths["json"], json.dumps(results, indent=2, default=str))
    for rep in reps:
        for f in rep.figures:
            atomic_write_bytes(out / "figures" / f"{rep.system}-{f.name}.png", f.png_bytes())
    atomic_write_text(paths["markdown"], render_markdown(reps))
    atomic_write_text(paths["html"], render_html(reps))
    return paths


def load_results(path: str | Path) -> list[Reproduction]:
    """Read a run's ``results.json`` (or the directory holding it)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.exists():
        raise FileNotFoundError(f"no results.json at {p}; run `divelab reproduce --out DIR` first")
    try:
        data = json.loads(p.read_text())
        return [Reproduction.from_dict(d) for d in data["reproductions"]]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{p} is not a divelab results.json: {exc}") from exc
