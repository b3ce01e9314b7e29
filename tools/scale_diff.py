"""Compare the saved full-scale runs with the saved quick ones: runtimes, claims whose verdict changed, and the
empirical claims that stay under-powered at full scale.

    .venv/bin/python tools/scale_diff.py            # Markdown on stdout, one section per system with a full run

Claims are matched by statement; a statement that exists at one scale only is listed as such (full runs add
claims, e.g. the real-LLM ones, that quick does not measure).
"""

from __future__ import annotations

import sys

from readme_results import FULL, RESULTS, _reps, resumed_note


def _verdicts(rep) -> dict[str, object]:
    return {c.statement: c for c in rep.claims}


def system_section(key: str, quick, full) -> list[str]:
    resumed = resumed_note(full)
    full_time = f"{full.runtime_s:.0f} s" + (f" ({resumed})" if resumed else "")
    lines = [f"### {key}", "", f"Runtime: full {full_time}, quick {quick.runtime_s:.0f} s" if quick
             else f"Runtime: full {full_time} (no quick run saved)", ""]
    q = _verdicts(quick) if quick else {}
    f = _verdicts(full)
    changed = [(s, q[s], c) for s, c in f.items() if s in q and q[s].verdict != c.verdict]
    if changed:
        lines.append("Verdicts that differ between quick and full:")
        lines += [f"- {s}: quick **{a.verdict.value}** ({a.measured_text()}) → full **{b.verdict.value}** "
                  f"({b.measured_text()})" for s, a, b in changed]
    else:
        lines.append("No claim measured at both scales changed its verdict.")
    only_full = [s for s in f if s not in q]
    if only_full:
        lines.append(f"Measured at full only: {len(only_full)} claim(s).")
    weak = [c for c in f.values() if c.kind.value == "empirical" and c.power_text()
            and ("under-powered" in c.power_text() or "too few units" in c.power_text())]
    if weak:
        lines.append("Under-powered at full scale:")
        lines += [f"- {c.statement}: {c.power_text()}" for c in weak]
    return lines + [""]


def main() -> int:
    quick, full = _reps(RESULTS), _reps(FULL)
    if not full:
        print("No full-scale run is saved (docs/results/full/ is empty).")
        return 0
    out = [f"## Full vs quick ({len(full)} of {len(quick)} systems have a full run)", ""]
    for key in sorted(full):
        out += system_section(key, quick.get(key), full[key])
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
