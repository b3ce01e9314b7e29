"""An optional deterministic tool guard: defence in depth beyond the paper (off by default).

Pinning keeps the rule in front of the model; the guard does not depend on the model at all.
It grades every tool call against the *current* pinned rules (which only the signed operator
channel can change) and blocks a violating call before it executes, so neither compaction nor
a forged "operator update" in context text can get a governed call through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from divelab.chat.types import ToolCall
from divelab.safety.pinning.card import PinnedRules, RuleCard
from divelab.safety.pinning.constraints import ToolCallGrader, Violation


@dataclass
class ToolGuard:
    rules: RuleCard | PinnedRules
    blocked: list[tuple[ToolCall, list[Violation]]] = field(default_factory=list)

    @property
    def card(self) -> RuleCard:
        return self.rules.card if isinstance(self.rules, PinnedRules) else self.rules

    def check(self, call: ToolCall) -> list[Violation]:
        """The violations ``call`` would commit; non-empty means: do not execute it."""
        violations = ToolCallGrader(list(self.card.constraints)).grade(call)
        if violations:
            self.blocked.append((call, violations))
        return violations

    @staticmethod
    def refusal(violations: list[Violation]) -> str:
        reasons = "; ".join(f"{v.constraint_id}: {v.reason}" for v in violations)
        return f"BLOCKED by policy guard ({reasons}). The call was not executed."
