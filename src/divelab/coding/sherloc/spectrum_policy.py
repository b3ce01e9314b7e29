"""A diagnostician that combines the test spectrum with the repository evidence the loop gathers.

:class:`SpectrumDiagnostician` plays the same SHERLOC tool protocol as
:class:`~divelab.coding.sherloc.policy.HeuristicDiagnostician` (find and read the failing test,
look up the definitions it calls and the traceback's frames, read the top candidates) and is
handed, like an engineer who ran the suite under coverage, the program spectrum: for each line,
how many failing and passing tests executed it. It ranks functions by a fixed, stated rule:

1. the function's best Ochiai suspiciousness (its most suspicious line), as SBFL ranks them;
2. among functions tied on that score (SBFL ties are common: every line run only by the failing
   tests scores 1), the repository evidence from the conversation: a frame of the failing test's
   traceback, then a function the failing test calls, then a name the issue mentions;
3. then SBFL's own order (file, line).

Inside the chosen function the line is, among its most suspicious lines, the traceback's line if
there is one, else the line sharing most identifiers with the issue, else the first. The rule is
fixed before any measurement (no weights to fit); it is a stand-in for a reasoning LLM that reads
a coverage report, not evidence about one. The file texts are read for their AST outline (which
function holds a line), as an editor's outline view would; every tool call is counted as usual.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from divelab.chat import Message
from divelab.coding.sherloc.baselines import ochiai_functions
from divelab.coding.sherloc.mutate import function_at, functions
from divelab.coding.sherloc.policy import _BUILTIN, _WORD, HeuristicDiagnostician, _hypothesis


@dataclass
class SpectrumDiagnostician(HeuristicDiagnostician):
    """SBFL spectrum + the loop's repository evidence (see the module docstring). ``files``: the repository's
    texts (the buggy file included); ``spectrum[file][line] = (failing, passing)`` tests executing it."""

    files: dict[str, str] = field(default_factory=dict)
    spectrum: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    n_failing: int = 0

    def __post_init__(self) -> None:
        if not self.spectrum:
            raise ValueError("SpectrumDiagnostician needs a non-empty spectrum (per-test coverage of the failing "
                             "and passing tests)")
        # (file, function) -> its lines in SBFL order with their scores; SBFL order of first appearance kept
        self._lines = ochiai_functions(self.files, self.spectrum, self.n_failing or None)

    def _evidence(self, issue: str, frames: list, messages: list[Message]) -> dict[tuple[str, str], float]:
        """The heuristic's repository evidence (traceback 3, called by the test 2, named in the issue 1) per
        class-qualified function."""
        out: dict[tuple[str, str], float] = {}
        for f, n, name, s in super()._candidates(issue, frames, messages):
            text = self.files.get(f)
            fn = function_at(text, abs(n)) if text else None
            if fn is None:
                same = [x for x in (functions(text) if text else []) if x.qualname.rsplit(".", 1)[-1] == name]
                fn = same[0] if len(same) == 1 else None
            if fn is not None:
                key = (f, fn.qualname)
                out[key] = max(out.get(key, 0.0), s)
        return out

    def _candidates(self, issue: str, frames: list, messages: list[Message]) -> list[tuple[str, int, str, float]]:
        """(file, def line, qualified function, SBFL score), best first by the stated rule."""
        ev = self._evidence(issue, frames, messages)
        order = {key: i for i, key in enumerate(self._lines)}
        ranked = sorted(self._lines, key=lambda k: (-round(self._lines[k][0][1], 9), -ev.get(k, 0.0), order[k]))
        out = []
        for f, q in ranked:
            fn = next((x for x in functions(self.files[f]) if x.qualname == q), None)
            out.append((f, fn.start if fn else self._lines[(f, q)][0][0], q, self._lines[(f, q)][0][1]))
        return out

    def _case(self, issue: str, frames: list, cands: list, messages: list[Message]) -> dict:
        words = Counter(w for w in _WORD.findall(issue) if w not in _BUILTIN)
        findings = []
        for f, _def_line, q, score in cands[:self.top_k]:
            lines = self._lines[(f, q)]
            top = [ln for ln, s in lines if round(s, 9) == round(lines[0][1], 9)]
            src = self.files[f].splitlines()
            tb = [ln for ff, ln, _ in frames if ff == f and ln in top]

            overlap = {ln: sum(words[w] for w in set(_WORD.findall(src[ln - 1]))) if 0 < ln <= len(src) else 0
                       for ln in top}
            line = tb[-1] if tb else max(top, key=lambda ln: (overlap[ln], -top.index(ln)))
            text = src[line - 1].strip() if 0 < line <= len(src) else ""
            cause, fix = _hypothesis(text)
            findings.append({
                "file": f, "symbol": q, "line_span": [line, line],
                "location_description": f"{q} in {f}, line {line}: `{text[:100]}` (SBFL {score:.2f})",
                "root_cause_hypothesis": cause, "solution_idea": fix,
                "dependencies": sorted({fn for _, _, fn in frames if fn != q.rsplit('.', 1)[-1]})[:5],
                "testing_impact": "the failing test in the issue should pass; rerun the module's tests",
                "confidence": round(float(score), 3)})
        return {"findings": findings}

