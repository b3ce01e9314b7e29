"""Compare the saved full-scale runs with the saved quick ones: runtimes, claims whose verdict changed, and the
empirical claims that stay under-powered at full scale.

    .venv/bin/python tools/scale_diff.py            # Markdown on stdout, one section per system with a full run

Claims are matched by statement; a statement that exists at one scale only is listed as such (full runs add
claims, e.g. the real-LLM ones, that quick does not measure).
"""

from __future__ import annotations

import subprocess
import sys

from import_closure import divelab_files
from readme_results import FULL, RESULTS, ROOT, _reps, resumed_note

from divelab.registry import get


def _verdicts(rep) -> dict[str, object]:
    return {c.statement: c for c in rep.claims}


def system_section(key: str, quick, full) -> list[str]:
    resumed = resumed_note(full)
    full_time = f"{full.runtime_s:.0f} s" + (f" ({resumed})" if resumed else "")
    lines = [f"### {key}", "", f"Runtime: full {full_time}, quick {quick.runtime_s:.0f} s" if quick
             else f"Runtime: full {full_time} (no quick run saved)", "", code_since(key, full), ""]
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


def code_since(key: str, rep) -> str:
    """Whether the code the system runs changed between the commit the full run recorded and HEAD: its own
    package, and every divelab module it imports (shared engines included, see import_closure). A saved result
    stands for the current code only when nothing changed."""
    recorded = str(rep.environment.get("commit") or "")
    if not recorded:
        return "Code: the run recorded no commit, so whether it matches the current code is unknown."
    commit, dirty = recorded.removesuffix("+dirty"), recorded.endswith("+dirty")
    module = get(key).module
    package = "src/" + module.replace(".", "/")
    shared = [f for f in divelab_files(module) if not f.startswith(package + "/")]
    diff = subprocess.run(["git", "-C", str(ROOT), "diff", "--name-only", commit, "HEAD", "--", package, *shared],
                          capture_output=True, text=True)
    if diff.returncode != 0:
        return f"Code: commit {commit} is not in this repository, so the comparison is unknown."
    changed = diff.stdout.split()
    own = [p.removeprefix(package + "/") for p in changed if p.startswith(package + "/")]
    engines = [p.removeprefix("src/") for p in changed if not p.startswith(package + "/")]
    state = f"run at {commit}{' (uncommitted changes)' if dirty else ''}"
    if dirty and "uncommitted" in rep.environment:
        # the run named the files that differed: edits elsewhere in the tree do not touch what this system runs
        edited = str(rep.environment["uncommitted"]).split()
        mine = [p for p in edited if p.startswith(package + "/") or p in shared]
        state = (f"run at {commit} (uncommitted changes in its code: {', '.join(mine)})" if mine else
                 f"run at {commit} (other files were being edited; none of them is code it runs)")
    if not changed:
        return f"Code: {state}; `{package}` and the {len(shared)} shared files it imports unchanged since."
    parts = ([f"in `{package}`: " + ", ".join(own)] if own else []) + (
        ["in shared code it imports: " + ", ".join(engines)] if engines else [])
    return f"Code: {state}; changed since " + "; ".join(parts)


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
