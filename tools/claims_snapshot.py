"""Snapshot one system's claims at a scale, to check that a refactor leaves every value unchanged.

    python tools/claims_snapshot.py backtrack --scale smoke --out /tmp/before.json
    (refactor)
    python tools/claims_snapshot.py backtrack --scale smoke --out /tmp/after.json --compare /tmp/before.json

``--compare`` prints every claim whose measured value, interval or verdict changed (timing claims
change run to run; everything else should not) and exits 1 when any did.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def snapshot(key: str, scale: str, seed: int) -> list[dict]:
    from divelab import registry
    from divelab.scaleout import run_reproduction

    system = registry.resolve_implemented([key])[0]
    rep = run_reproduction(system.module, scale, seed)
    return [{"statement": c.statement, "measured": c.measured, "ci": c.ci, "verdict": c.verdict.value,
             "kind": c.kind.value, "unit": c.unit} for c in rep.claims]


def compare(before: list[dict], after: list[dict]) -> list[str]:
    diffs = []
    b = {c["statement"]: c for c in before}
    a = {c["statement"]: c for c in after}
    for s in b.keys() - a.keys():
        diffs.append(f"gone: {s}")
    for s in a.keys() - b.keys():
        diffs.append(f"new: {s}")
    for s in b.keys() & a.keys():
        for f in ("measured", "ci", "verdict", "kind"):
            if json.dumps(b[s][f], default=str) != json.dumps(a[s][f], default=str):
                diffs.append(f"{f} changed ({b[s]['unit']}): {s}: {b[s][f]!r} -> {a[s][f]!r}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("system")
    ap.add_argument("--scale", default="smoke")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", default=None, help="an earlier snapshot to compare with")
    args = ap.parse_args()
    claims = snapshot(args.system, args.scale, args.seed)
    Path(args.out).write_text(json.dumps(claims, indent=1, default=str))
    if args.compare:
        diffs = compare(json.loads(Path(args.compare).read_text()), json.loads(json.dumps(claims, default=str)))
        print("\n".join(diffs) or "identical")
        return 1 if diffs else 0
    print(f"{len(claims)} claims -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
