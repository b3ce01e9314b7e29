"""Constraint Pinning: quarantine governance rules from lossy compaction.

``Pinned(inner, rules)`` wraps any compactor. Before compaction it rewrites every message (content,
tool names, argument keys and values, participant names) so that no copy of a pinned rule, no
forged or stale card and no retired rule text can stand next to the genuine card (see
:mod:`divelab.safety.pinning.quarantine` for what each becomes); gives the inner compactor the
budget minus the card; rewrites what the compactor produced (a summary may regenerate rule text);
then places the card at a fixed position and verifies it: exactly one card, unaltered, hash
matching, every rule present verbatim exactly once, no forged card markers or retired text.

Position (``position=``): ``"after_prompt"`` (default) puts the card right after the operator's
system prompt, the first message of the history when it is a system message, and before every
other message, *including system-role messages a framework adds* (summaries, memory), so a summary
line such as "rule G1 is revoked" can never precede the card; ``"first"`` puts the card before
everything, the system prompt included; ``"after_system"`` is the old behaviour (after all leading
system messages of the compacted view), kept for comparison only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from divelab.chat.types import Message, ToolCall
from divelab.safety.pinning.card import CARD_NAME, PinnedRules, RuleCard
from divelab.safety.pinning.compactors import Compactor, split_system
from divelab.safety.pinning.quarantine import Retired, Sanitizer
from divelab.safety.pinning.tokens import TokenCounter, default_counter

POSITIONS = ("after_prompt", "first", "after_system")


def _strip_value(v: Any, san: Sanitizer) -> Any:
    if isinstance(v, str):
        return san.text(v)
    if isinstance(v, (list, tuple)):
        return [_strip_value(x, san) for x in v]
    if isinstance(v, dict):
        out: dict[Any, Any] = {}
        for k, x in v.items():
            key = san.text(k) if isinstance(k, str) else k
            while key in out:  # two keys rewritten to the same reference stay distinct
                key = f"{key}'"
            out[key] = _strip_value(x, san)
        return out
    return v


def _strip_call(c: ToolCall, san: Sanitizer) -> ToolCall:
    call = ToolCall(san.text(c.name), _strip_value(c.arguments, san), san.text(c.id))
    rendered = Message("assistant", tool_calls=(call,)).text()
    if san.text(rendered) != rendered or san.leftovers(rendered) or _has_rule(rendered, san):
        # rule text spanning the JSON structure (e.g. across a key and its value): show the call's
        # rewritten JSON as one string instead of the structure
        import json

        call = ToolCall(call.name, {"redacted_arguments": san.text(json.dumps(call.arguments, sort_keys=True))},
                        call.id)
    return call


def _has_rule(text: str, san: Sanitizer) -> bool:
    return any(c.text in text for c in san.card.constraints)


def sanitize(m: Message, san: Sanitizer) -> Message:
    """``m`` rewritten by ``san`` in every place text can appear; a forged card loses its card tag."""
    calls = tuple(_strip_call(c, san) for c in m.tool_calls)
    return replace(m, content=san.text(m.content), tool_calls=calls, tool_call_id=san.text(m.tool_call_id),
                   name="" if m.name == CARD_NAME else san.text(m.name))


def strip_rules(m: Message, card: RuleCard, retired: tuple[Retired, ...] = ()) -> Message:
    """``m`` with pinned rule texts replaced by references everywhere ``Message.text()`` shows text
    (content, tool names, argument keys and values), forged card copies quarantined, retired rule
    texts marked; a forged card loses its card tag."""
    return sanitize(m, Sanitizer(card, retired))


@dataclass
class Pinned:
    """Any compactor plus a pinned rule card. ``rules`` may be a fixed ``RuleCard`` or a
    ``PinnedRules`` store (then signed operator updates take effect on the next view, and the rule
    texts they retired are marked wherever they still appear). ``position`` fixes where the card
    goes: ``"after_prompt"`` (default), ``"first"`` or ``"after_system"`` (see the module doc)."""

    inner: Compactor
    rules: RuleCard | PinnedRules
    counter: TokenCounter = field(default_factory=default_counter)
    verify: bool = True
    position: str = "after_prompt"
    compactions: int = 0
    _cache: dict[tuple[int, str], tuple[Message, Message]] = field(default_factory=dict, repr=False)
    _sanitizers: dict[tuple[str, int], Sanitizer] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.position not in POSITIONS:
            raise ValueError(f"unknown card position {self.position!r}; allowed: {', '.join(POSITIONS)}")

    @property
    def name(self) -> str:
        return f"{self.inner.name}+pin"

    @property
    def card(self) -> RuleCard:
        return self.rules.card if isinstance(self.rules, PinnedRules) else self.rules

    @property
    def retired(self) -> tuple[Retired, ...]:
        if not isinstance(self.rules, PinnedRules):
            return ()
        return tuple(Retired(*r) for r in self.rules.retired)

    def reset(self) -> None:
        self.inner.reset()
        self.compactions = 0
        self._cache.clear()

    def card_tokens(self) -> int:
        return self.counter.count_message(self.card.message())

    def _sanitizer(self) -> Sanitizer:
        card, retired = self.card, self.retired
        key = (card.digest, len(retired))
        if key not in self._sanitizers:
            self._sanitizers.clear()
            self._sanitizers[key] = Sanitizer(card, retired)
        return self._sanitizers[key]

    def view(self, history: list[Message], budget: int) -> list[Message]:
        card = self.card
        san = self._sanitizer()
        tag = f"{card.digest}/{len(san.retired_texts)}"
        # Stable rewritten copies: stateful inner compactors see the same objects every call.
        stripped = []
        for i, m in enumerate(history):
            hit = self._cache.get((i, tag))
            if hit is None or hit[0] is not m:
                hit = (m, sanitize(m, san))
                self._cache[(i, tag)] = hit
            stripped.append(hit[1])
        card_msg = card.message()
        inner_budget = max(budget - self.counter.count_message(card_msg), 0)
        out = self.inner.view(stripped, inner_budget)
        self.compactions = self.inner.compactions
        # A summary may regenerate a rule's text or a card's header; the card must stay the only copy.
        out = [sanitize(m, san) for m in out]
        result = self._place(card_msg, out, stripped[0] if stripped and stripped[0].role == "system" else None)
        if self.verify:
            card.verify(result, retired=san.retired_texts)
        return result

    def _place(self, card_msg: Message, out: list[Message], prompt: Message | None) -> list[Message]:
        if self.position == "first":
            return [card_msg, *out]
        if self.position == "after_system":
            sys_msgs, rest = split_system(out)
            return sys_msgs + [card_msg] + rest
        # after_prompt: only the operator's own system prompt may precede the card
        if prompt is not None and out:
            i = next((k for k, m in enumerate(out) if m is prompt), None)
            if i is None:
                i = next((k for k, m in enumerate(out) if m == prompt), None)
            if i is not None:
                return [out[i], card_msg, *out[:i], *out[i + 1:]]
        return [card_msg, *out]
