"""Compactors and the adapters that run real AutoGen / LangChain / LangMem / sumy code."""

from __future__ import annotations

import pytest

from divelab.chat import Message, ScriptedChatModel, ToolCall
from divelab.safety.pinning import ChatSummarizer, HeadTail, KeepLastN, SummarizingCompactor, SumySummarizer
from divelab.safety.pinning.adapters import (
    AutoGenBuffered,
    AutoGenHeadTail,
    AutoGenTokenLimited,
    LangChainSummarization,
    LangChainTrim,
    LangMemSummarize,
)
from divelab.safety.pinning.tokens import TokenCounter

C = TokenCounter.chars4()
RULE = "Never run rm -rf on any server."


def history(turns: int = 10) -> list[Message]:
    h = [Message("system", "You are an ops assistant."), Message("user", f"Standing rule: {RULE}"),
         Message("assistant", "Understood.")]
    for i in range(turns):
        h.append(Message("user", f"Task {i}: check the logs of service {i}."))
        h.append(Message("assistant", "", tool_calls=(ToolCall("search_logs", {"service": f"s{i}"}, f"c{i}"),)))
        h.append(Message("tool", "\n".join(f"Worker {j} served request {i * 100 + j} in {j * 7} ms with cache hits."
                                           for j in range(6 + 2 * i)), tool_call_id=f"c{i}"))
        h.append(Message("assistant", f"Service {i} looks healthy."))
    return h


def visible(view: list[Message]) -> bool:
    return any(RULE in m.text() for m in view)


def test_history_fits_means_no_compaction() -> None:
    h = history(2)
    for comp in (KeepLastN(counter=C), HeadTail(counter=C), AutoGenBuffered(counter=C), LangChainTrim(counter=C)):
        assert comp.view(h, 10**6) == h, comp.name
        assert comp.compactions == 0


def test_autogen_buffered_is_real_last_n_eviction() -> None:
    h = history()
    comp = AutoGenBuffered(counter=C)
    view = comp.view(h, 1200)
    assert view[0] == h[0]  # system slot kept outside the AutoGen context, as AssistantAgent does
    assert view[1:] == h[-(len(view) - 1):] or view[1:] == h[-(len(view)):][1:]
    assert not visible(view) and comp.compactions == 1
    assert C.count_messages(view) <= 1200
    assert view[1].role != "tool"  # AutoGen drops a leading function-result message itself


def test_autogen_head_tail_inserts_its_placeholder_and_keeps_the_head() -> None:
    view = AutoGenHeadTail(counter=C).view(history(), 1200)
    assert any(m.content.startswith("Skipped") and m.content.endswith("messages.") for m in view)  # AutoGen's text
    assert visible(view)  # the policy turn is in the head


def test_autogen_token_limited_respects_limit_and_drops_the_middle() -> None:
    h = history()
    view = AutoGenTokenLimited(counter=C).view(h, 1500)
    assert C.count_messages(view) <= 1500
    assert view[-1] == h[-1] and visible(view)  # pops from the middle: first and last stay


def test_langchain_trim_keeps_system_and_starts_on_human() -> None:
    h = history()
    view = LangChainTrim(counter=C).view(h, 1200)
    assert view[0] == h[0] and view[1].role == "user"
    assert C.count_messages(view) <= 1200 and not visible(view)


def test_langchain_summarization_middleware_replaces_history_with_summary() -> None:
    h = history()
    comp = LangChainSummarization(summarizer=SumySummarizer("lexrank", counter=C), counter=C)
    view = comp.view(h, 1500)
    assert comp.compactions == 1
    assert any(m.content.startswith("Here is a summary of the conversation to date") for m in view)  # LangChain's text
    assert view[-1] == h[-1]


def test_langmem_summarize_messages_uses_running_summary() -> None:
    h = history()
    seen: list[list[Message]] = []

    def summarizer_fn(msgs: list[Message], tools: object) -> str:
        seen.append(msgs)
        return "SUMMARY: services checked, all healthy."

    model = ScriptedChatModel(fn=summarizer_fn)
    comp = LangMemSummarize(model=model, counter=C)
    view = comp.view(h, 1500)
    assert comp.compactions == 1 and len(seen) == 1
    assert seen[0][-1].content.startswith("Create a summary of the conversation above")  # LangMem's own prompt
    assert any("SUMMARY: services checked" in m.content and m.role == "system" for m in view)
    assert not visible(view)
    view2 = comp.view(h + [Message("user", "one more")], 1500)  # reuses the running summary
    assert view2[-1].content == "one more"


def test_sumy_summaries_are_verbatim_extracts() -> None:
    text = "\n".join(f"Sentence number {i} talks about caching and latency of worker {i % 3}." for i in range(30))
    for method in ("lexrank", "textrank"):
        out = SumySummarizer(method, counter=C).summarize_text(text, 60)
        lines = out.split("\n")
        assert 1 <= len(lines) < 30 and all(line in text for line in lines)
        assert C.count(out) <= 60 + len(lines)
    with pytest.raises(ValueError, match="unknown sumy method"):
        SumySummarizer("bart")


def test_llm_summarizer_prompt_and_running_summary() -> None:
    prompts: list[str] = []

    def fn(msgs: list[Message], tools: object) -> str:
        prompts.append(msgs[-1].content)
        return f"summary #{len(prompts)}"

    comp = SummarizingCompactor(ChatSummarizer(ScriptedChatModel(fn=fn)), counter=C)
    h = history()
    view = comp.view(h, 1200)
    assert "<transcript>" in prompts[0] and RULE in prompts[0]
    assert view[1].content.endswith("summary #1") and not visible(view)
    assert C.count_messages(view) <= 1200
    with pytest.raises(ValueError, match="must contain"):
        ChatSummarizer(ScriptedChatModel(["x"]), prompt="no slot")


def test_keep_last_and_head_tail_budgets() -> None:
    h = history()
    for budget in (300, 900, 2000):
        v1 = KeepLastN(counter=C).view(h, budget)
        assert C.count_messages(v1) <= max(budget, C.count_messages(h[:1]))
        v2 = HeadTail(counter=C).view(h, budget)
        assert C.count_messages(v2) <= budget + 20
    assert KeepLastN(n=3, counter=C).view(h, 10**6)[1:] == h[-3:]
