"""A tool-calling agent loop with a context budget and a pluggable compactor.

The history is append-only; before every model call the compactor produces the view the model
sees (optionally pinned). Tool calls are executed by ``executor`` after an optional guard check.
User and tool text is scanned for claimed rule changes, which are logged and never applied:
only ``operator_update`` (signed) can change the pinned rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from divelab.chat.types import ChatModel, Message, ToolCall, ToolSpec
from divelab.safety.pinning.card import PinnedRules, SignedUpdate
from divelab.safety.pinning.compactors import Compactor
from divelab.safety.pinning.guard import ToolGuard
from divelab.safety.pinning.pinning import Pinned
from divelab.safety.pinning.tokens import TokenCounter, default_counter


@dataclass
class Turn:
    """What happened after one user message."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    blocked: list[ToolCall] = field(default_factory=list)
    reply: str = ""
    context_tokens: list[int] = field(default_factory=list)  # tokens of each view sent to the model
    first_context: list[Message] = field(default_factory=list)  # the view at decision time


@dataclass
class ToolAgent:
    model: ChatModel
    tools: list[ToolSpec]
    executor: Callable[[ToolCall], str]
    compactor: Compactor
    budget: int
    rules: PinnedRules | None = None  # the governing rules; None: no pinning, no guard
    pin: bool = True  # pin ``rules`` as a card outside the compactable window
    guard: bool = False  # deterministic tool guard (needs rules)
    counter: TokenCounter = field(default_factory=default_counter)
    max_tool_rounds: int = 4
    history: list[Message] = field(default_factory=list)
    inband_attempts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.budget <= 0:
            raise ValueError(f"budget must be a positive number of tokens, got {self.budget}")
        if self.guard and self.rules is None:
            raise ValueError("guard=True needs rules=PinnedRules(...) to check calls against")
        self._view: Compactor = (Pinned(self.compactor, self.rules, counter=self.counter)
                                 if self.rules is not None and self.pin else self.compactor)
        self._guard = ToolGuard(self.rules) if self.guard and self.rules is not None else None

    def context(self) -> list[Message]:
        return self._view.view(self.history, self.budget)

    def record(self, message: Message) -> None:
        """Append a message without calling the model (replaying a transcript)."""
        if self.rules is not None and message.role in ("user", "tool"):
            self.inband_attempts += self.rules.observe_text(message.content)
        self.history.append(message)

    def operator_update(self, update: SignedUpdate) -> None:
        if self.rules is None:
            raise ValueError("this agent has no pinned rules to update")
        self.rules.apply(update)

    def send(self, text: str) -> Turn:
        """One user message, then model calls and tool executions until the model stops calling tools."""
        self.record(Message("user", text))
        turn = Turn()
        for _ in range(self.max_tool_rounds):
            ctx = self.context()
            if not turn.first_context:
                turn.first_context = list(ctx)
            turn.context_tokens.append(self.counter.count_messages(ctx))
            reply = self.model.complete(ctx, self.tools).message
            self.history.append(reply)
            if not reply.tool_calls:
                turn.reply = reply.content
                return turn
            for call in reply.tool_calls:
                turn.tool_calls.append(call)
                violations = self._guard.check(call) if self._guard is not None else []
                if violations:
                    turn.blocked.append(call)
                    result = ToolGuard.refusal(violations)
                else:
                    result = self.executor(call)
                self.record(Message("tool", result, tool_call_id=call.id))
        return turn
