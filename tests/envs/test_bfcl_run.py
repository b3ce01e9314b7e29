"""Asking a chat model the BFCL questions: tools as the chat protocol sends them, replies read back as BFCL's
decoded calls (tool calls or a Python-syntax call list), scored by BFCL's rules; batched and one-by-one
chat models give the same answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from divelab.chat.scripted import ScriptedChatModel
from divelab.chat.types import ChatResponse, Message, ToolCall
from divelab.envs import bfcl
from divelab.envs.bfcl_run import ask, calls_of, tool_name, tools_of

FIXTURES = Path(__file__).parent / "external_fixtures" / "bfcl"


def records() -> list[bfcl.BFCLRecord]:
    return [r for c in ("simple", "multiple", "parallel", "irrelevance") for r in bfcl.load_category(c, FIXTURES)]


def right(record: bfcl.BFCLRecord) -> Message:
    """A reply with the reference answer as tool calls (dotted names sent with underscores)."""
    calls = tuple(ToolCall(tool_name(name), args) for c in bfcl.reference_calls(record) for name, args in c.items())
    return Message("assistant", "", tool_calls=calls)


def test_tools_are_json_schema_with_names_tool_apis_accept() -> None:
    tri = bfcl.load_category("simple", FIXTURES)[0]
    (tool,) = tools_of(tri)
    assert tool.name == "geometry_triangle_area" and "." not in tool.name
    assert tool.parameters["type"] == "object"  # BFCL's "dict"
    assert any(p.get("type") == "number" for p in tool.parameters["properties"].values())  # BFCL's "float"


def test_reference_answers_score_full_marks_and_prose_scores_none() -> None:
    recs = records()
    by_id = {r.id: r for r in recs}

    def oracle(messages, tools):
        rec = next(r for r in recs if r.question == messages[-1].content)
        return right(rec) if rec.ground_truth else "I can't help with that using these tools."

    run = ask(ScriptedChatModel(fn=oracle), recs)
    assert run.accuracy == 1.0 and [a.id for a in run.answers] == [r.id for r in recs]
    assert {a.source for a in run.answers if by_id[a.id].ground_truth} == {"tool_calls"}
    prose = ask(ScriptedChatModel(fn=lambda m, t: "The answer is 25."), recs)
    answerable = [a for a in prose.answers if by_id[a.id].ground_truth]
    assert not any(a.correct for a in answerable) and {a.source for a in answerable} == {"none"}
    assert all(a.correct for a in prose.answers if a.category == "irrelevance")  # abstaining is right there
    assert prose.called() == 0.0


def test_text_call_lists_count_and_wrong_values_fail() -> None:
    tri = bfcl.load_category("simple", FIXTURES)[0]
    ok = ask(ScriptedChatModel(["[geometry_triangle_area(base=10, height=5)]"]), [tri])
    assert ok.correct == [True] and ok.answers[0].source == "text"
    wrong = ask(ScriptedChatModel(["[geometry_triangle_area(base=11, height=5)]"]), [tri])
    assert wrong.correct == [False] and wrong.answers[0].error_type


def test_calls_of_reads_tool_calls_before_text() -> None:
    resp = ChatResponse(Message("assistant", "f(a=1)", tool_calls=(ToolCall("g", {"b": 2}),)), "tool_calls", 1, 1)
    assert calls_of(resp) == ([{"g": {"b": 2}}], "tool_calls")
    assert calls_of(ChatResponse(Message("assistant", "no call here"), "stop", 1, 1)) == ([], "none")


class Batched:
    """A chat model with ``complete_many(..., tools_each=...)`` that answers like ``inner`` and counts batches."""

    def __init__(self, inner: ScriptedChatModel) -> None:
        self.inner, self.batches = inner, []

    def complete(self, messages, tools=None, **kw):
        return self.inner.complete(messages, tools, **kw)

    def complete_many(self, conversations, tools=None, *, temperature=None, max_tokens=None, tools_each=None):
        self.batches.append(len(conversations))
        return [self.inner.complete(m, t) for m, t in zip(conversations, tools_each, strict=True)]


def test_batched_and_single_requests_agree() -> None:
    recs = records()
    reply = lambda m, t: f"[{t[0].name}(x=1)]"  # noqa: E731
    one = ask(ScriptedChatModel(fn=reply), recs)
    seen: list[tuple[int, int]] = []
    many_model = Batched(ScriptedChatModel(fn=reply))
    many = ask(many_model, recs, batch_size=2, progress=lambda d, n: seen.append((d, n)))
    assert [a.correct for a in one.answers] == [a.correct for a in many.answers]
    assert [a.reply for a in one.answers] == [a.reply for a in many.answers]
    assert max(many_model.batches) == 2 and sum(many_model.batches) == len(recs)
    assert seen[-1] == (len(recs), len(recs))


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="at least one BFCL record"):
        ask(ScriptedChatModel(["x"]), [])
    with pytest.raises(ValueError, match="batch_size"):
        ask(ScriptedChatModel(["x"]), records(), batch_size=0)
