"""Messages, tool calls and the chat-model protocol every agent system in divelab talks to.

The shapes follow the OpenAI chat-completions wire format closely (roles ``system``, ``user``,
``assistant``, ``tool``; tool calls with JSON arguments) because that is what every
OpenAI-compatible server speaks, but they are plain dataclasses so tests and scripted models
need no HTTP at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for. ``arguments`` is already parsed JSON."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, sort_keys=True)},
        }


@dataclass(frozen=True)
class Message:
    """One chat message.

    ``name`` is free metadata (OpenAI's optional participant name); divelab uses it to tag
    messages a harness inserted itself, e.g. a pinned rule card. ``tool_call_id`` links a
    ``tool`` message to the assistant call it answers.
    """

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}; allowed: {', '.join(ROLES)}")
        if not isinstance(self.content, str):
            raise TypeError(f"message content must be str, got {type(self.content).__name__}")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool calls, got role {self.role!r}")
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    def with_content(self, content: str) -> Message:
        return replace(self, content=content)

    def text(self) -> str:
        """Everything a reader of the context sees in this message, tool-call arguments included."""
        parts = [self.content] if self.content else []
        for c in self.tool_calls:
            parts.append(f"{c.name}({json.dumps(c.arguments, sort_keys=True)})")
        return "\n".join(parts)

    def to_openai(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.role == "tool":
            d["tool_call_id"] = self.tool_call_id
        if self.name and self.role in ("system", "user", "assistant"):
            d["name"] = self.name
        return d


def system(content: str, name: str = "") -> Message:
    return Message("system", content, name=name)


def user(content: str) -> Message:
    return Message("user", content)


def assistant(content: str = "", tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> Message:
    return Message("assistant", content, tool_calls=tuple(tool_calls))


def tool(content: str, tool_call_id: str) -> Message:
    return Message("tool", content, tool_call_id=tool_call_id)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: name, description, JSON-schema of its parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ChatResponse:
    """What a chat model returned for one request."""

    message: Message
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw: dict[str, Any] | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a list of messages (optionally with tools) with one assistant message."""

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse: ...


def repair_tool_pairs(messages: list[Message]) -> list[Message]:
    """Make a (possibly compacted) message list valid for OpenAI-style servers.

    Compaction can evict an assistant tool call but keep its result, or the reverse; servers
    reject both. Unpaired halves are turned into plain text so no information is silently lost.
    """
    call_ids = {c.id for m in messages for c in m.tool_calls if c.id}
    result_ids = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[Message] = []
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in call_ids:
            out.append(Message("user", f"[tool result]\n{m.content}"))
        elif m.tool_calls and not all(c.id and c.id in result_ids for c in m.tool_calls):
            out.append(Message("assistant", m.text()))
        else:
            out.append(m)
    return out
