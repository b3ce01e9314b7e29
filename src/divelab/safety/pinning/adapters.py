"""Adapters that run the real compaction code of the frameworks people use.

Each adapter converts divelab messages to the framework's message types, calls the framework's
own code, and converts the result back (original messages come back as the same objects; new
ones, such as summaries or "Skipped N messages" placeholders, are converted). Budgets are given
in tokens and translated into each framework's own knob:

- AutoGen ``autogen_core.model_context``: ``BufferedChatCompletionContext`` (last-n eviction;
  ``buffer_size`` = the most recent messages that fit the budget), ``HeadAndTailChatCompletionContext``
  (head/tail sizes from ``head_frac`` of the budget), ``TokenLimitedChatCompletionContext``
  (its own middle-out eviction, token counts from a counting-only ``ChatCompletionClient``).
  AutoGen keeps the agent's system message outside the model context, so do we.
- LangChain ``langchain_core.messages.trim_messages`` (the LangGraph short-term-memory recipe:
  ``strategy="last"``, ``include_system=True``, ``start_on="human"``).
- LangChain v1 ``SummarizationMiddleware`` (the ``create_agent``/LangGraph stock summarisation
  path), driven through its ``before_model`` hook with its own state rewriting.
- LangMem ``summarize_messages`` with a ``RunningSummary`` (what ``SummarizationNode`` runs).

The summary writer of the two summarisation paths is pluggable: any divelab ``ChatModel``
(through ``ChatModelAsLangChain``) or sumy's extractive LexRank/TextRank (no LLM).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

from divelab.chat.types import ChatModel, ChatResponse, Message, ToolCall
from divelab.safety.pinning.compactors import Budgeted, Summarizer, fit_prefix, fit_suffix
from divelab.safety.pinning.tokens import TokenCounter, default_counter

# ----------------------------------------------------------------------------- AutoGen


def _to_autogen(m: Message) -> Any:
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

    if m.role == "system":
        return SystemMessage(content=m.content)
    if m.role == "user":
        return UserMessage(content=m.content, source="user")
    if m.role == "assistant":
        if m.tool_calls:
            calls = [FunctionCall(id=c.id or f"call_{i}", name=c.name, arguments=json.dumps(c.arguments))
                     for i, c in enumerate(m.tool_calls)]
            return AssistantMessage(content=calls, thought=m.content or None, source="assistant")
        return AssistantMessage(content=m.content, source="assistant")
    return FunctionExecutionResultMessage(
        content=[FunctionExecutionResult(content=m.content, call_id=m.tool_call_id, name="tool", is_error=False)]
    )


def _from_autogen(x: Any) -> Message:
    from autogen_core.models import AssistantMessage, FunctionExecutionResultMessage, SystemMessage

    if isinstance(x, SystemMessage):
        return Message("system", x.content)
    if isinstance(x, AssistantMessage):
        if isinstance(x.content, list):
            calls = tuple(ToolCall(c.name, json.loads(c.arguments or "{}"), c.id) for c in x.content)
            return Message("assistant", x.thought or "", tool_calls=calls)
        return Message("assistant", x.content)
    if isinstance(x, FunctionExecutionResultMessage):
        r = x.content[0]
        return Message("tool", r.content, tool_call_id=r.call_id)
    content = x.content if isinstance(x.content, str) else str(x.content)
    return Message("user", content)


def _run_autogen_context(ctx: Any, rest: list[Message]) -> list[Message]:
    converted = [_to_autogen(m) for m in rest]
    back = {id(c): m for c, m in zip(converted, rest, strict=True)}

    async def go() -> list[Any]:
        for c in converted:
            await ctx.add_message(c)
        return await ctx.get_messages()

    out = asyncio.run(go())
    return [back.get(id(x)) or _from_autogen(x) for x in out]


@dataclass
class AutoGenBuffered(Budgeted):
    """``autogen_core.model_context.BufferedChatCompletionContext``: keep the last ``buffer_size``."""

    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "autogen-buffered"
    compactions: int = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from autogen_core.model_context import BufferedChatCompletionContext

        sys_msgs, rest, room = self.split(history, budget)
        buffer_size = max(1, len(rest) - fit_suffix(rest, room, self.counter))
        out = _run_autogen_context(BufferedChatCompletionContext(buffer_size=buffer_size), rest)
        if len(out) < len(rest):
            self.compactions += 1
        return sys_msgs + out


@dataclass
class AutoGenHeadTail(Budgeted):
    """``autogen_core.model_context.HeadAndTailChatCompletionContext`` with sizes from the budget."""

    head_frac: float = 0.3
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "autogen-head-tail"
    compactions: int = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from autogen_core.model_context import HeadAndTailChatCompletionContext

        sys_msgs, rest, room = self.split(history, budget)
        if not rest:
            return sys_msgs
        if self.counter.count_messages(rest) <= room:
            head, tail = len(rest), 1
        else:
            head = max(1, fit_prefix(rest, int(room * self.head_frac), self.counter))
            tail_room = room - self.counter.count_messages(rest[:head])
            tail = max(1, len(rest) - fit_suffix(rest, max(tail_room, 0), self.counter))
        out = _run_autogen_context(HeadAndTailChatCompletionContext(head_size=head, tail_size=tail), rest)
        if len(out) != len(rest) or any(a is not b for a, b in zip(out, rest, strict=False)):
            self.compactions += 1
        return sys_msgs + out


def _counting_client(counter: TokenCounter) -> Any:
    """A ``ChatCompletionClient`` that only counts tokens (TokenLimited needs nothing else)."""
    from autogen_core.models import ChatCompletionClient, ModelFamily, ModelInfo, RequestUsage

    class CountingClient(ChatCompletionClient):
        async def create(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError("counting-only client: used for token counts, never for completions")

        def create_stream(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError("counting-only client")

        async def close(self) -> None:
            return None

        def actual_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def total_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def count_tokens(self, messages: Any, *, tools: Any = ()) -> int:
            return counter.count_messages(_from_autogen(m) for m in messages)

        def remaining_tokens(self, messages: Any, *, tools: Any = ()) -> int:
            raise NotImplementedError("pass token_limit; this client has no model window")

        @property
        def capabilities(self) -> Any:
            return self.model_info

        @property
        def model_info(self) -> ModelInfo:
            return ModelInfo(vision=False, function_calling=True, json_output=False,
                             family=ModelFamily.UNKNOWN, structured_output=False)

    return CountingClient()


@dataclass
class AutoGenTokenLimited(Budgeted):
    """``autogen_core.model_context.TokenLimitedChatCompletionContext`` (drops messages from the middle)."""

    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "autogen-token-limited"
    compactions: int = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from autogen_core.model_context import TokenLimitedChatCompletionContext

        sys_msgs, rest, room = self.split(history, budget, 1)
        ctx = TokenLimitedChatCompletionContext(_counting_client(self.counter), token_limit=room)
        out = _run_autogen_context(ctx, rest)
        if len(out) < len(rest):
            self.compactions += 1
        return sys_msgs + out


# ----------------------------------------------------------------------------- LangChain


def to_langchain(m: Message, mid: str | None = None) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    kw: dict[str, Any] = {"id": mid} if mid else {}
    if m.role == "system":
        return SystemMessage(content=m.content, **kw)
    if m.role == "user":
        return HumanMessage(content=m.content, **kw)
    if m.role == "assistant":
        calls = [{"name": c.name, "args": c.arguments, "id": c.id or f"call_{i}", "type": "tool_call"}
                 for i, c in enumerate(m.tool_calls)]
        return AIMessage(content=m.content, tool_calls=calls, **kw)
    return ToolMessage(content=m.content, tool_call_id=m.tool_call_id or "unknown", **kw)


def from_langchain(x: Any) -> Message:
    from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

    content = x.content if isinstance(x.content, str) else x.text
    if isinstance(x, SystemMessage):
        return Message("system", content)
    if isinstance(x, AIMessage):
        calls = tuple(ToolCall(c["name"], dict(c.get("args") or {}), c.get("id") or "") for c in x.tool_calls)
        return Message("assistant", content, tool_calls=calls)
    if isinstance(x, ToolMessage):
        return Message("tool", content, tool_call_id=x.tool_call_id)
    return Message("user", content)


def _lc_counter(counter: TokenCounter):  # noqa: ANN202
    def count(messages: Any) -> int:
        return counter.count_messages(from_langchain(m) for m in messages)

    return count


@dataclass
class LangChainTrim(Budgeted):
    """``langchain_core.messages.trim_messages`` as the LangGraph short-term memory docs use it."""

    counter: TokenCounter = field(default_factory=default_counter)
    name: str = "langchain-trim"
    compactions: int = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from langchain_core.messages import trim_messages

        lc = [to_langchain(m, f"m{i}") for i, m in enumerate(history)]
        by_id = {f"m{i}": m for i, m in enumerate(history)}
        out = trim_messages(lc, max_tokens=max(budget, 1), token_counter=_lc_counter(self.counter),
                            strategy="last", include_system=True, start_on="human", allow_partial=False)
        if len(out) < len(history):
            self.compactions += 1
        return [by_id.get(x.id) or from_langchain(x) for x in out]


def _make_chat_bridge() -> type:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ChatModelAsLangChain(BaseChatModel):
        """A divelab ``ChatModel`` as a LangChain chat model (for LangMem / LangChain code paths)."""

        model: Any = None

        @property
        def _llm_type(self) -> str:
            return "divelab-chat"

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            reply: ChatResponse = self.model.complete([from_langchain(m) for m in messages],
                                                      max_tokens=kw.get("max_tokens"))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply.message.content))])

    return ChatModelAsLangChain


_BRIDGE: type | None = None


def chat_model_as_langchain(model: ChatModel) -> Any:
    """Wrap any divelab ``ChatModel`` as a LangChain ``BaseChatModel``."""
    global _BRIDGE
    if _BRIDGE is None:
        _BRIDGE = _make_chat_bridge()
    return _BRIDGE(model=model)


class _RefusingModel:
    def complete(self, *a: Any, **k: Any) -> ChatResponse:
        raise RuntimeError("this bridge is only used for token counting; summaries come from the summarizer")


def _summary_runnable(summarizer: Summarizer, budget_fn: Any, drop_last_instruction: bool) -> Any:
    """A LangChain runnable returning the summary written by a divelab ``Summarizer``."""
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    def run(inp: Any) -> Any:
        msgs = inp.to_messages() if hasattr(inp, "to_messages") else list(inp)
        ours = [from_langchain(m) for m in msgs]
        if drop_last_instruction and ours and ours[-1].role == "user":
            ours = ours[:-1]  # the framework's "summarise the above" instruction, not conversation
        text = summarizer(ours, "", budget_fn())
        return AIMessage(content=text) if drop_last_instruction else text

    return RunnableLambda(run)


@dataclass
class _SummaryPath(Budgeted):
    """A framework's summarisation path; its summary writer is an LLM (``model``) or a divelab ``Summarizer``
    (e.g. sumy LexRank), exactly one of them. Its name is ``label[writer]`` unless given."""

    summarizer: Summarizer | None = None
    model: ChatModel | None = None
    label: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if (self.summarizer is None) == (self.model is None):
            raise ValueError("give exactly one of summarizer= (e.g. SumySummarizer()) or model= (a ChatModel)")
        self.name = self.name or f"{self.label}[{getattr(self.summarizer, 'name', 'llm')}]"
        self.reset()


@dataclass
class LangChainSummarization(_SummaryPath):
    """LangChain v1 ``SummarizationMiddleware`` (the stock summarisation of ``create_agent``,
    which runs on LangGraph): triggers at the budget, keeps the newest ``keep_frac`` of it, and
    replaces the rest with one summary message. Summary writer: an LLM (``model``) or a
    divelab ``Summarizer`` (e.g. sumy LexRank)."""

    keep_frac: float = 0.5
    summary_frac: float = 0.25
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = ""
    compactions: int = 0
    label: ClassVar[str] = "langchain-summarization"

    def reset(self) -> None:
        super().reset()
        self._state: list[Any] = []
        self._consumed = 0
        self._budget = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from langchain.agents.middleware.summarization import SummarizationMiddleware

        sys_msgs, rest, room = self.split(history, budget, 2)
        self._budget = room
        for i in range(self._consumed, len(rest)):
            self._state.append(to_langchain(rest[i], f"m{i}"))
        self._consumed = len(rest)
        by_id = {f"m{i}": m for i, m in enumerate(rest)}
        kw: dict[str, Any] = {}
        if self.summarizer is not None:
            kw["summarizer"] = _summary_runnable(self.summarizer, lambda: int(self._budget * self.summary_frac), False)
            model = chat_model_as_langchain(_RefusingModel())
        else:
            model = chat_model_as_langchain(self.model)
        mw = SummarizationMiddleware(model, trigger=("tokens", room), keep=("tokens", int(room * self.keep_frac)),
                                     token_counter=_lc_counter(self.counter), **kw)
        update = mw.before_model({"messages": self._state}, None)
        if update is not None:
            self._state = [m for m in update["messages"] if type(m).__name__ != "RemoveMessage"]
            self.compactions += 1
        return sys_msgs + [by_id.get(x.id) or from_langchain(x) for x in self._state]


@dataclass
class LangMemSummarize(_SummaryPath):
    """LangMem ``summarize_messages`` with a running summary (the logic of ``SummarizationNode``):
    full history in, ``[system?, summary, recent...]`` out."""

    summary_frac: float = 0.25
    counter: TokenCounter = field(default_factory=default_counter)
    name: str = ""
    compactions: int = 0
    label: ClassVar[str] = "langmem-summarize"

    def reset(self) -> None:
        super().reset()
        self._running: Any = None
        self._budget = 0

    def view(self, history: list[Message], budget: int) -> list[Message]:
        from langmem.short_term import summarize_messages

        sys_msgs, rest, room = self.split(history, budget, 8)
        # LangMem keeps one leading system message itself; fold several into one view-only prefix.
        lc = [to_langchain(m, f"m{i}") for i, m in enumerate(rest)]
        by_id = {f"m{i}": m for i, m in enumerate(rest)}
        self._budget = room
        max_summary = max(int(room * self.summary_frac), 1)
        if self.summarizer is not None:
            model = _summary_runnable(self.summarizer, lambda: max_summary, True)
        else:
            model = chat_model_as_langchain(self.model)
        before = self._running
        with warnings.catch_warnings():
            # LangMem warns when the span to summarise exceeds max_tokens and it falls back to the
            # whole span; that is its stock behaviour, which is what we measure.
            warnings.simplefilter("ignore", RuntimeWarning)
            res = summarize_messages(lc, running_summary=self._running, model=model, max_tokens=room,
                                     max_summary_tokens=min(max_summary, room - 1),
                                     token_counter=_lc_counter(self.counter))
        self._running = res.running_summary
        if self._running is not None and (before is None or self._running.summary != before.summary
                                          or self._running.last_summarized_message_id != before.last_summarized_message_id):
            self.compactions += 1
        return sys_msgs + [by_id.get(getattr(x, "id", None)) or from_langchain(x) for x in res.messages]
