"""A repair agent (no LLM) and the injection of findings into its first message.

The agent reads its first message: the issue, optionally followed by injected findings (a JSON
block, see :func:`divelab.coding.sherloc.finding.render`). With locations it searches candidate
patches there; without, it localizes itself first, which costs characters read: ``localizer="bm25"``
ranks functions by BM25 over the issue (Agentless-style) and reads the top file;
``localizer="sbfl"`` is a more competent agent that runs the suite under coverage and edits the
most suspicious lines (Ochiai) first, reading the functions that hold them. Candidate patches are E170's mutation operators applied at
the location's lines (they are their own inverses: a flipped comparison flips back, ``+1`` undoes
``-1``); a solution idea that names an operator class orders them. Each candidate is validated by
running the task's failing tests and then the whole suite in the sandbox, within a budget.

``gate`` is the selective-injection rule: deployable signals only (the top finding's confidence and
whether another localizer agrees), never the gold patch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from divelab.coding.sherloc.baselines import bm25_localize, ochiai_localize
from divelab.coding.sherloc.benchmark import Repo, Task
from divelab.coding.sherloc.finding import CaseFile, Location
from divelab.coding.sherloc.mutate import function_at, functions, mutants_of

_BLOCK = re.compile(r"```json\s*(.*?)```", re.S)
_HINTS = {"comparison": ("comparison-flip",), "arithmetic": ("arithmetic-swap", "off-by-one-up", "off-by-one-down"),
          "by one": ("off-by-one-up", "off-by-one-down", "range-bound-up", "range-bound-down"),
          "negate": ("drop-unary", "negate-condition", "bool-op-swap"), "boolean": ("bool-op-swap", "bool-flip")}


@dataclass
class RepairOutcome:
    resolved: bool
    validations: int
    localization_chars: int  # characters the agent read to localize (0 when it trusted the message)


def parse_injected(message: str) -> list[dict]:
    m = _BLOCK.search(message)
    if not m:
        return []
    try:
        return list(json.loads(m.group(1)).get("findings", []))
    except (json.JSONDecodeError, AttributeError):
        return []


def gate(case: CaseFile, others: list[list[Location]], *, min_confidence: float = 0.5) -> bool:
    """Inject only when the top finding is confident AND another localizer's top-3 names its function."""
    top = max(case.findings, key=lambda f: f.confidence)
    if top.confidence < min_confidence:
        return False
    for locs in others:
        if any(loc.file == top.file and loc.symbol and loc.symbol == top.symbol for loc in locs[:3]):
            return True
    return False


@dataclass
class RepairAgent:
    """Search-and-validate repair over a repository; ``budget`` = candidate validations per task."""

    repo: Repo
    budget: int = 6
    memo: dict | None = None
    localizer: str = "bm25"
    """how the agent localizes when no report names a location: "bm25" or "sbfl" (see the module docstring)."""

    def __post_init__(self) -> None:
        if self.memo is None:
            self.memo = {}
        if self.localizer not in ("bm25", "sbfl"):
            raise ValueError(f"localizer must be 'bm25' or 'sbfl', got {self.localizer!r}")

    def _targets(self, task: Task, message: str) -> tuple[list[tuple[str, str | None, tuple[int, int] | None]], int]:
        found = parse_injected(message)
        if found:
            return [(f.get("file", ""), f.get("symbol"), tuple(f["line_span"]) if f.get("line_span") else None)
                    for f in found], 0
        files = self.repo.with_task(task)
        if self.localizer == "sbfl":
            return self._sbfl_targets(task, files)
        locs = bm25_localize(files, message, k=3)
        chars = sum(len("\n".join(files[loc.file].splitlines()[:])) for loc in locs[:1])  # it reads the top file
        chars += sum(80 * 40 for _ in locs[1:3])  # and skims the next two functions
        return [(loc.file, loc.symbol, None) for loc in locs], chars

    def _sbfl_targets(self, task: Task, files: dict[str, str]
                      ) -> tuple[list[tuple[str, str | None, tuple[int, int] | None]], int]:
        """The most suspicious lines (Ochiai, one target per line, in rank order) and the characters of the
        functions holding the first three of them, which the agent reads."""
        locs = [loc for loc in ochiai_localize(files, task.spectrum, len(task.failing_tests)) if loc.symbol]
        targets = [(loc.file, loc.symbol, loc.span) for loc in locs]
        read: list[tuple[str, str]] = []
        for loc in locs:
            if (loc.file, loc.symbol) not in read and len(read) < 3:
                read.append((loc.file, loc.symbol))
        chars = 0
        for f, q in read:
            fn = next((x for x in functions(files[f]) if x.qualname == q), None)
            chars += len("\n".join(files[f].splitlines()[fn.start - 1:fn.end])) if fn else 0
        return targets, chars

    def _candidates(self, task: Task, file: str, symbol: str | None, span, hint: str) -> list[str]:
        text = task.mutated if file == task.file else self.repo.files.get(file)
        if text is None:
            return []
        fns = [f for f in functions(text) if symbol and (f.qualname == symbol or f.qualname.endswith("." + symbol))]
        if not fns and span:
            fn = function_at(text, span[0])
            fns = [fn] if fn else []
        out = []
        for fn in fns[:1]:
            lines = set(range(span[0] - 1, span[1] + 2)) if span and span[1] - span[0] <= 5 else None
            ms = mutants_of(text, file, fn, lines=lines)
            pref = next((ops for k, ops in _HINTS.items() if k in hint.lower()), ())
            ms.sort(key=lambda m: (m.operator not in pref and not (m.operator == "drop-unary" and "negate" in hint),))
            out += [m.mutated for m in ms]
        return out

    def _valid(self, task: Task, file: str, text: str) -> bool:
        key = (task.id, file, hash(text))
        if key not in self.memo:
            files = {**self.repo.with_task(task), file: text}
            quick = self.repo.run(files, task.failing_tests[:5])
            ok = quick.status == "completed" and not quick.failing and bool(quick.outcomes)
            if ok:
                full = self.repo.run(files)
                ok = len(full.passing) >= task.n_passing + len(task.failing_tests)
            self.memo[key] = ok
        return self.memo[key]

    def repair(self, task: Task, message: str) -> RepairOutcome:
        targets, chars = self._targets(task, message)
        hints = {f.get("file"): f.get("solution_idea", "") for f in parse_injected(message)}
        used = 0
        seen: set[int] = set()
        for file, symbol, span in targets:
            for cand in self._candidates(task, file, symbol, span, hints.get(file, "")):
                if hash(cand) in seen:
                    continue
                seen.add(hash(cand))
                if used >= self.budget:
                    return RepairOutcome(False, used, chars)
                used += 1
                if self._valid(task, file, cand):
                    return RepairOutcome(True, used, chars)
        if targets and parse_injected(message) and used < self.budget:
            # the injected locations were exhausted: fall back to localizing itself
            rest = RepairAgent(self.repo, self.budget - used, self.memo, self.localizer).repair(
                task, message.split("```json")[0])
            return RepairOutcome(rest.resolved, used + rest.validations, chars + rest.localization_chars)
        return RepairOutcome(False, used, chars)
