"""Report rendering. One section per system; a table of every claim with colour-coded verdicts.

The HTML is a single file: figures are embedded as base64 PNGs and the stylesheet is inline,
so the report opens offline in any browser.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from divelab.cache import atomic_write_bytes, atomic_write_text
from divelab.claims import KIND_VALUES, NOT_COUNTED, TALLY_VALUES, Claim, Figure, Kind, Reproduction
from divelab.report import checks, public
from divelab.report.text import cite, md_cell, plain

VERDICT_CLASS = {
    "reproduced": "v-ok",
    "direction holds": "v-dir",
    "direction only": "v-partly",
    "not separated from noise": "v-noise",
    "not reproduced": "v-no",
    "uninformative": "v-un",
    "not checkable here": "v-nc",
    NOT_COUNTED: "v-nc",
}
# 3: planted kind, uninformative verdict, baselines judged on the strongest; 4: negative controls, falsifiers,
# replication units, values judged with their interval, chance only as an exact constant
RESULTS_VERSION = 4
# format 3 is still read: its claims keep the verdicts they were judged with, and their positive verdicts, which
# carry no falsifier or negative control, are listed apart as not counted until the system is re-run
READABLE_VERSIONS = (3, 4)

KIND_NOTE = {
    "empirical": "could have failed for a reason outside our code and our constants; only these count in the headline",
    "planted": "our simulator or harness writes the phenomenon; a test of the machinery, not evidence",
    "check": "mathematics or implementation correctness; fails only through a bug",
    "by construction": "true because of how the set-up is built",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1300px;
 padding:0 1rem;color:#1d1f23;line-height:1.45}
h1{margin-bottom:.2rem} .meta{color:#555;font-size:.9rem}
table{border-collapse:collapse;width:100%;margin:1rem 0;font-size:.92rem}
th,td{border:1px solid #d5d8dc;padding:.4rem .55rem;vertical-align:top;text-align:left}
th{background:#f3f4f6}
.verdict{font-weight:600;white-space:nowrap;border-radius:4px;padding:.1rem .4rem}
.v-ok{background:#d8f5dd;color:#11632a}.v-partly{background:#fff1c2;color:#7a5a00}
.v-no{background:#fbd9d9;color:#8a1414}.v-nc{background:#e5e7eb;color:#374151}
.v-noise{background:#e8e2f8;color:#4b2f91} .v-dir{background:#e3f3e6;color:#2f6b3c}
.v-un{background:#f1ece4;color:#6b5a3a} .kind{font-size:.8rem;color:#444;white-space:nowrap}
td.n{text-align:right} tr.planned td{color:#777} nav h2{margin-top:1.2rem}
#summary{font-size:.85rem} #summary td,#summary th{padding:.25rem .4rem} #summary th{font-size:.74rem}
#summary td:nth-child(2){min-width:16rem}
#summary .rule{display:inline;margin-left:.4rem}
.rule{display:block;font-size:.78rem;color:#555;margin-top:.2rem}
figure{margin:1rem 0} figure img{max-width:100%;border:1px solid #e5e7eb}
figcaption{color:#444;font-size:.88rem} figure.claims-figure img{max-width:820px}
.smoke{background:#fff4d6;border:1px solid #e0b84c;border-radius:4px;padding:.5rem .7rem;font-weight:600}
.note{color:#444;font-size:.86rem} section{border-top:2px solid #e5e7eb;margin-top:2rem}
code{background:#f3f4f6;padding:0 .2rem}
"""


def _summary_counts(reps: list[Reproduction], kind: Kind | str | None = Kind.EMPIRICAL,
                    moved: dict[str, set[str]] | None = None) -> dict[str, int]:
    """Verdict tally over claims of one kind (empirical: the headline); ``None`` for all claims. ``moved``
    (:func:`divelab.report.checks.moved`) lists per system the positives whose verdict moved on other kernels:
    they count as "positive, not counted"."""
    counts = {v: 0 for v in TALLY_VALUES}
    for r in reps:
        for k, n in checks.verdict_counts(r, kind, (moved or {}).get(r.system)).items():
            counts[k] += n
    return counts


def tallies_by_kind(reps: list[Reproduction], moved: dict[str, set[str]] | None = None) -> dict[str, dict[str, int]]:
    """``{kind: {verdict: n}}`` for every kind: what the report's tally table shows."""
    return {k: _summary_counts(reps, k, moved) for k in KIND_VALUES}


def _anchor(rep: Reproduction) -> str:
    return f"sys-{rep.system}"


def _summary_rows(reps: list[Reproduction], failed: list[dict[str, Any]] | None = None,
                  moved: dict[str, set[str]] | None = None) -> list[dict[str, Any]]:
    """One row per system of the week: the ones run here with their counts, the others as planned
    or not run, so a reader of "eighteen systems" sees which have no reproduction."""
    from divelab import registry

    by_key = {r.system: r for r in reps}
    errors: dict[str, list[str]] = {}
    for f in failed or []:
        errors.setdefault(str(f.get("system")), []).append(f"seed {f.get('seed')}: {f.get('error')}")
    rows = []
    known = set()
    for s in registry.SYSTEMS:
        known.add(s.key)
        rep = by_key.get(s.key)
        rows.append({
            "alias": s.alias.upper(), "key": s.key, "name": s.name, "arxiv": s.arxiv, "status": s.status,
            "rep": rep, "anchor": _anchor(rep) if rep else "",
            "counts": checks.verdict_counts(rep, moved_here=(moved or {}).get(rep.system)) if rep else {},
            "other": sum(1 for c in rep.claims if c.kind is not Kind.EMPIRICAL) if rep else 0,
            "why": "planned: no reproduction yet" if not s.implemented else (
                "FAILED — " + "; ".join(errors[s.key]) if s.key in errors else "implemented, not run in this report"),
        })
        if rep is not None and s.key in errors:
            rows[-1]["status"] = "partly failed: " + "; ".join(errors[s.key])
    for rep in reps:  # systems outside the registry (tests, plugins) still get a row
        if rep.system not in known:
            rows.append({"alias": "—", "key": rep.system, "name": rep.title, "arxiv": "—", "status": "implemented",
                         "rep": rep, "anchor": _anchor(rep),
                         "counts": checks.verdict_counts(rep, moved_here=(moved or {}).get(rep.system)),
                         "other": sum(1 for c in rep.claims if c.kind is not Kind.EMPIRICAL), "why": ""})
    # the systems of this report first: a one-system report opens on its own row, not on 17 others
    return sorted(rows, key=lambda row: row["rep"] is None)


def runs_note(rep: Reproduction) -> str:
    """A line on retried tasks and dead workers (``details["scaleout"]``), or "" when every task ran once."""
    notes = []
    for r in rep.details.get("scaleout", []) if isinstance(rep.details, dict) else []:
        if not isinstance(r, dict) or (r.get("attempts", 1) <= 1 and not r.get("worker_deaths")):
            continue
        deaths = f", {r.get('worker_deaths')} worker death(s)" if r.get("worker_deaths") else ""
        why = "; ".join(str(x) for x in r.get("failed_attempts", []))
        notes.append(f"seed {r.get('seed')} took {r.get('attempts')} attempts ({r.get('where')}{deaths}): {why}")
    return "Retried: " + " · ".join(notes) if notes else ""


def _heading(rep: Reproduction) -> str:
    """A consistent section title: E-number, divelab's name for the system, arXiv id."""
    from divelab import registry

    try:
        s = registry.get(rep.system)
    except registry.UnknownSystemError:
        return rep.title
    return f"{s.alias.upper()} · {s.name} (arXiv {s.arxiv})"


SMOKE_WARNING = ("Smoke scale: these runs check that every step of each reproduction works, in seconds; their "
                 "numbers are not evidence for or against any paper. Run --scale quick (or full) for evidence.")


_FIGURE_CACHE: dict[str, Figure | None] = {}


def claims_figures(reps: list[Reproduction]) -> dict[str, Figure]:
    """Each system's headline comparison drawn from its claims (see :mod:`divelab.report.claims_figure`).
    Drawn once per content: a long run re-renders its report after every system."""
    from divelab.report.claims_figure import claims_figure

    figures = {}
    for r in reps:
        key = json.dumps([r.system, [c.to_dict() for c in r.claims]], sort_keys=True, default=str)
        if key not in _FIGURE_CACHE:
            _FIGURE_CACHE[key] = claims_figure(r)
        if _FIGURE_CACHE[key] is not None:
            figures[r.system] = _FIGURE_CACHE[key]
    return figures


def render_html(reps: list[Reproduction], title: str = "divelab reproduction report",
                failed: list[dict[str, Any]] | None = None, figures: dict[str, Figure] | None = None,
                moved: dict[str, set[str]] | None = None) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("divelab.report", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    env.filters["plain"] = plain
    figures = claims_figures(reps) if figures is None else figures
    sections = []
    for r in reps:
        heading = _heading(r)
        sections.append({"rep": r, "anchor": _anchor(r), "heading": heading,
                         "subtitle": r.title if r.title not in heading else "",
                         "claims_figure": figures.get(r.system), "public": public.pairs(r.claims),
                         "env": ", ".join(f"{k} {v}" for k, v in r.environment.items()), "runs": runs_note(r)})
    return env.get_template("report.html").render(
        title=title, css=CSS, generated=time.strftime("%Y-%m-%d %H:%M:%S"), headline=_summary_counts(reps, moved=moved),
        verdict_values=TALLY_VALUES, verdict_class=VERDICT_CLASS, kind_note=KIND_NOTE, cite=cite,
        smoke_warning=SMOKE_WARNING if any(r.scale == "smoke" for r in reps) else "",
        summary=_summary_rows(reps, failed, moved), tally=tallies_by_kind(reps, moved), sections=sections,
        moved=moved or {}, moved_note=checks.MOVED_NOTE)


_md_cell = md_cell


def render_markdown(reps: list[Reproduction], title: str = "divelab reproduction report",
                    figure_dir: str | None = "figures", failed: list[dict[str, Any]] | None = None,
                    figures: dict[str, Figure] | None = None, moved: dict[str, set[str]] | None = None) -> str:
    counts = _summary_counts(reps, moved=moved)
    figures = claims_figures(reps) if figures is None and figure_dir is not None else (figures or {})
    lines = [f"# {title}", ""]
    if any(r.scale == "smoke" for r in reps):
        lines += [f"> **{SMOKE_WARNING}**", ""]
    lines += ["Empirical claims: " + " · ".join(f"{v}: {n}" for v, n in counts.items()), "",
             "| Kind | " + " | ".join(TALLY_VALUES) + " | all |", "|---" * (len(TALLY_VALUES) + 2) + "|"]
    for kind, kc in tallies_by_kind(reps, moved).items():
        lines.append(f"| {kind} | " + " | ".join(str(n) for n in kc.values()) + f" | {sum(kc.values())} |")
    lines.append("")
    for f in failed or []:
        tries = f" (after {f.get('attempts')} attempts, {f.get('worker_deaths', 0)} worker death(s))" if (
            f.get("attempts", 1) > 1 or f.get("worker_deaths")) else ""
        lines += [f"**FAILED**: `{f.get('system')}` seed {f.get('seed')}{tries}: {_md_cell(f.get('error'))}", ""]
    for rep in reps:
        lines += [f"## {rep.title}", "",
                  f"system `{rep.system}` · scale `{rep.scale}` · seed {rep.seed} · ran {rep.runtime_s:.1f} s", ""]
        if runs_note(rep):
            lines += [runs_note(rep), ""]
        if rep.setup:
            lines += [rep.setup, ""]
        if rep.planted:
            lines += [f"*What this set-up plants* (planted claims test the machinery, not the paper): {rep.planted}", ""]
        lines += claims_table_md(rep.claims, rep.system,
                                 {st: checks.MOVED_NOTE for st in (moved or {}).get(rep.system, ())})
        lines.append("")
        if public.pairs(rep.claims):
            lines += ["Measured on public games or data, each beside the same comparison on our own games:", "",
                      *public.side_by_side_md(rep.claims), ""]
        if figure_dir is not None:
            for f in [*([figures[rep.system]] if rep.system in figures else []), *rep.figures]:
                lines += [f"![{f.caption}]({figure_dir}/{rep.system}-{f.name}.png)", "", f"*{f.caption}*", ""]
    return "\n".join(lines)


def claims_table_md(claims: list[Claim], system: str = "", extra: dict[str, str] | None = None) -> list[str]:
    """A Markdown table of claims: kind, paper (cited by arXiv id when ``system`` is given), ours
    (with the strongest baseline), verdict and rule; ``extra`` adds a line per statement to its verdict (whether
    it held under another kernel ISA)."""
    lines = ["| Claim | Kind | Paper | Ours | Verdict | Note |", "|---|---|---|---|---|---|"]
    for c in claims:
        source = cite(system, c.source) if system and c.source else c.source
        paper = c.paper_value + (f" ({source})" if source else "")
        ours = c.measured_text() + (f"; strongest baseline: {plain(c.baseline)}" if c.baseline else "")
        ours += f"; {c.baselines_text()}" if c.baselines else ""
        ours += f"; {c.power_text()}" if c.power_text() else ""
        rule = "; ".join(t for t in (c.rule_text(), c.audit_text(), (extra or {}).get(c.statement, "")) if t)
        verdict = f"**{c.verdict.value}**" + (f" ({rule})" if rule else "")
        lines.append(
            f"| {_md_cell(c.statement)} | {c.kind.value} | {_md_cell(paper)} | {_md_cell(ours)} | "
            f"{_md_cell(verdict)} | {_md_cell(plain(c.note))} |"
        )
    return lines


def write_report(reps: list[Reproduction], out_dir: str | Path, write_json: bool = True,
                 failed: list[dict[str, Any]] | None = None,
                 moved: dict[str, set[str]] | None = None) -> dict[str, Path]:
    """Write ``results.json``, ``report.md`` (+ figure PNGs) and ``report.html`` into ``out_dir``.
    Each file is written atomically. ``write_json=False`` re-renders from an existing results.json
    without rewriting it (``divelab report``); ``moved`` as in :func:`_summary_counts`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "markdown": out / "report.md", "html": out / "report.html"}
    if write_json:
        results = {"divelab_results_version": RESULTS_VERSION, "reproductions": [r.to_dict() for r in reps],
                   "failed": list(failed or [])}
        atomic_write_text(paths["json"], json.dumps(results, indent=2, default=str))
    figures = claims_figures(reps)
    for rep in reps:
        for f in [*([figures[rep.system]] if rep.system in figures else []), *rep.figures]:
            atomic_write_bytes(out / "figures" / f"{rep.system}-{f.name}.png", f.png_bytes())
    atomic_write_text(paths["markdown"], render_markdown(reps, failed=failed, figures=figures, moved=moved))
    atomic_write_text(paths["html"], render_html(reps, failed=failed, figures=figures, moved=moved))
    return paths


def load_results(path: str | Path) -> list[Reproduction]:
    """Read a run's ``results.json`` (or the directory holding it), checking every field a report
    needs, so a bad file is an error that names the file and the field, never a traceback."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.exists():
        raise FileNotFoundError(f"no results.json at {p}; run `divelab reproduce --out DIR` first")
    if not p.is_file():
        raise ValueError(f"{p} is not a file")
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p} is not a divelab results.json: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("reproductions"), list):
        raise ValueError(f"{p} is not a divelab results.json: no 'reproductions' list")
    version = data.get("divelab_results_version")
    if version is not None and version not in READABLE_VERSIONS:
        raise ValueError(f"{p} was written by results format {version}; this divelab reads formats "
                         f"{', '.join(map(str, READABLE_VERSIONS))} (claims carry kinds, verdict rules and negative "
                         "controls): re-run the reproduction")
    reps = []
    for i, d in enumerate(data["reproductions"]):
        where = f"{p}: reproductions[{i}]"
        try:
            _check_fields(d, where)
            reps.append(Reproduction.from_dict(d))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return reps


def load_failed(path: str | Path) -> list[dict[str, Any]]:
    """The failed tasks recorded in a run's results.json (empty when there were none)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        failed = json.loads(p.read_text()).get("failed", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in failed if isinstance(f, dict)] if isinstance(failed, list) else []


def _check_fields(d: Any, where: str) -> None:
    import base64
    import binascii

    if not isinstance(d, dict):
        raise ValueError("not an object")
    for key, typ in (("system", str), ("title", str), ("scale", str), ("seed", int), ("claims", list)):
        if not isinstance(d.get(key), typ):
            raise ValueError(f"field {key!r} must be {typ.__name__}, got {d.get(key)!r}")
    if not isinstance(d.get("runtime_s", 0.0), int | float):
        raise ValueError(f"field 'runtime_s' must be a number, got {d.get('runtime_s')!r}")
    for j, c in enumerate(d["claims"]):
        ci = c.get("ci") if isinstance(c, dict) else None
        if ci is not None and not (isinstance(ci, list) and len(ci) == 2
                                   and all(isinstance(x, int | float) for x in ci)):
            raise ValueError(f"claims[{j}].ci must be [low, high] numbers, got {ci!r}")
    for j, f in enumerate(d.get("figures", [])):
        try:
            data = base64.b64decode(f["png_base64"], validate=True)
        except (binascii.Error, KeyError, TypeError) as exc:
            raise ValueError(f"figures[{j}] has no valid base64 PNG data ({exc})") from None
        if not data.startswith(b"\x89PNG"):
            raise ValueError(f"figures[{j}] is not a PNG image")
