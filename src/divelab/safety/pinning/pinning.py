"""Constraint Pinning: quarantine governance rules from lossy compaction.

``Pinned(inner, rules)`` wraps any compactor. Before compaction it replaces every verbatim
occurrence of a pinned rule in the history with a short reference (so the compactor cannot
duplicate, paraphrase or be talked into dropping it), gives the inner compactor the budget minus
the card, then re-inserts the card right after the system slot and verifies it: exactly one
card, unaltered, hash matching, every rule present verbatim exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from divelab.chat.types import Message, ToolCall
from divelab.safety.pinning.card import CARD_NAME, PinnedRules, RuleCard
from divelab.safety.pinning.compactors import Compactor, split_system
from divelab.safety.pinning.tokens import TokenCounter, default_counter


def _strip_text(text: str, card: RuleCard) -> str:
    changed = True
    while changed:  # a replacement can never create a new occurrence, but loop to be sure
        changed = False
        for c in card.constraints:
            if c.text in text:
                text = text.replace(c.text, f"[rule {c.id}: see pinned card]")
                changed = True
    return text


def _strip_value(v: Any, card: RuleCard) -> Any:
    if isinstance(v, str):
        return _strip_text(v, card)
    if isinstance(v, list):
        return [_strip_value(x, card) for x in v]
    if isinstance(v, dict):
        return {k: _strip_value(x, card) for k, x in v.items()}
    return v


def strip_rules(m: Message, card: RuleCard) -> Message:
    """``m`` with pinned rule texts replaced by references; a forged card loses its card tag."""
    calls = tuple(ToolCall(c.name, _strip_value(c.arguments, card), c.id) for c in m.tool_calls)
    return replace(m, content=_strip_text(m.content, card), tool_calls=calls,
                   name="" if m.name == CARD_NAME else m.name)


@dataclass
class Pinned:
    """Any compactor plus a pinned rule card. ``rules`` may be a fixed ``RuleCard`` or a
    ``PinnedRules`` store (then signed operator updates take effect on the next view)."""

    inner: Compactor
    rules: RuleCard | PinnedRules
    counter: TokenCounter = field(default_factory=default_counter)
    verify: bool = True
    compactions: int = 0
    _cache: dict[tuple[int, str], tuple[Message, Message]] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return f"{self.inner.name}+pin"

    @property
    def card(self) -> RuleCard:
        return self.rules.card if isinstance(self.rules, PinnedRules) else self.rules

    def reset(self) -> None:
        self.inner.reset()
        self.compactions = 0
        self._cache.clear()

    def card_tokens(self) -> int:
        return self.counter.count_message(self.card.message())

    def view(self, history: list[Message], budget: int) -> list[Message]:
        card = self.card
        # Stable stripped copies: stateful inner compactors see the same objects every call.
        stripped = []
        for i, m in enumerate(history):
            hit = self._cache.get((i, card.digest))
            if hit is None or hit[0] is not m:
                hit = (m, strip_rules(m, card))
                self._cache[(i, card.digest)] = hit
            stripped.append(hit[1])
        card_msg = card.message()
        inner_budget = max(budget - self.counter.count_message(card_msg), 0)
        out = self.inner.view(stripped, inner_budget)
        self.compactions = self.inner.compactions
        # A summary may regenerate a rule's text; the card must stay its only copy.
        out = [strip_rules(m, card) if m is not card_msg else m for m in out]
        sys_msgs, rest = split_system(out)
        result = sys_msgs + [card_msg] + rest
        if self.verify:
            card.verify(result)
        return result
