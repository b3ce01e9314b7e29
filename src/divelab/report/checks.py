"""Cross-machine checks of saved runs, and what they mean for the tally.

``tools/cross_isa.py`` repeats a saved run under other CPU kernels (another instruction set, another chip) and
keeps, per claim, whether its verdict held (``docs/results/stability.json``). A positive verdict that moved
when only the floating-point rounding changed rests on less replication than its interval says: the report and
the README list it as "positive, not counted", beside those that lack their falsifier or negative control.
Only checks made against the very run shown count (same system, scale and recorded commit): a check of an
earlier save says nothing about this one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from divelab.claims import NOT_COUNTED, POSITIVE, Kind, Reproduction

MOVED_NOTE = "not counted: its verdict moved when the run was repeated on other CPU kernels"


def load_checks(path: str | Path) -> list[dict[str, Any]]:
    """The checks saved by ``tools/cross_isa.py --save`` ([] when there is no such file)."""
    p = Path(path)
    return json.loads(p.read_text())["runs"] if p.exists() else []


def checks_of(rep: Reproduction, checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checks made against this saved run: same system and scale, the commit it recorded."""
    commit = rep.environment.get("commit")
    return [e for e in checks if e["system"] == rep.system and e["scale"] == rep.scale and commit
            and e["saved_commit"] == commit]


def moved(reps: list[Reproduction], checks: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Per system, the statements of empirical positive claims whose verdict moved in a check of that run."""
    out: dict[str, set[str]] = {}
    for rep in reps:
        flipped = {row["statement"] for e in checks_of(rep, checks) for row in e["claims"] if not row["same_verdict"]}
        hit = {c.statement for c in rep.claims
               if c.kind is Kind.EMPIRICAL and c.verdict in POSITIVE and c.statement in flipped}
        if hit:
            out[rep.system] = hit
    return out


def verdict_counts(rep: Reproduction, kind: Kind | str | None = Kind.EMPIRICAL,
                   moved_here: set[str] | None = None) -> dict[str, int]:
    """``rep.verdict_counts(kind)`` with each positive in ``moved_here`` moved to "positive, not counted"."""
    counts = rep.verdict_counts(kind)
    for c in rep.claims:
        if c.statement in (moved_here or set()) and (kind is None or c.kind == kind) and c.tally_key != NOT_COUNTED:
            counts[c.tally_key] -= 1
            counts[NOT_COUNTED] += 1
    return counts
