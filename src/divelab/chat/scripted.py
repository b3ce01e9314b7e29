"""A scripted chat model for tests and demos: replies come from a list or a function.

Use it to test harnesses, never as evidence about how real models behave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from divelab.chat.types import ChatResponse, Message, ToolSpec

Reply = Message | str
ReplyFn = Callable[[list[Message], list[ToolSpec] | None], Reply]


@dataclass
class ScriptedChatModel:
    """Answers with ``replies`` in order (strings become assistant text), or by calling ``fn``.

    Every request is recorded in ``calls`` so tests can check what the model was shown.
    """

    replies: Sequence[Reply] = ()
    fn: ReplyFn | None = None
    calls: list[list[Message]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.replies and self.fn is None:
            raise ValueError("ScriptedChatModel needs replies=[...] or fn=callable(messages, tools)")
        self._i = 0

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        self.calls.append(list(messages))
        if self.fn is not None:
            reply = self.fn(list(messages), tools)
        else:
            if self._i >= len(self.replies):
                raise RuntimeError(f"ScriptedChatModel ran out of replies after {len(self.replies)} call(s)")
            reply = self.replies[self._i]
            self._i += 1
        msg = Message("assistant", reply) if isinstance(reply, str) else reply
        if msg.role != "assistant":
            raise ValueError(f"scripted replies must be assistant messages, got role {msg.role!r}")
        return ChatResponse(message=msg, finish_reason="tool_calls" if msg.tool_calls else "stop")
