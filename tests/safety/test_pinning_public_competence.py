"""The pinning agent's competence on public BFCL questions: a seeded sample, both models asked the same questions,
the adapted-minus-untuned claim read from per-question correctness (floor = uninformative), and a clear record when
the BFCL data is not installed."""

from __future__ import annotations

from pathlib import Path

from divelab.chat.scripted import ScriptedChatModel
from divelab.chat.types import Message, ToolCall
from divelab.claims import Kind, Verdict
from divelab.envs import bfcl
from divelab.envs.bfcl_run import tool_name
from divelab.safety.pinning import public_competence as pc

FIXTURES = str(Path(__file__).parents[1] / "envs" / "external_fixtures" / "bfcl")
SIZES = (("simple", 5), ("multiple", 5), ("irrelevance", 5))


def oracle(records: list[bfcl.BFCLRecord], only: str = "") -> ScriptedChatModel:
    """Answers every answerable question (of category ``only``, when given) with its reference calls and abstains
    on the rest."""
    def reply(messages, tools):
        rec = next(r for r in records if r.question == messages[-1].content)
        if only and rec.category != only:
            return "I think the answer is 7."
        calls = tuple(ToolCall(tool_name(n), a) for c in bfcl.reference_calls(rec) for n, a in c.items())
        return Message("assistant", "", tool_calls=calls) if calls else "None of these functions applies."
    return ScriptedChatModel(fn=reply)


def test_adapted_over_untuned_is_read_per_question() -> None:
    records = bfcl.sample(SIZES, 0, pc.SALT, FIXTURES)
    d = pc.measure(oracle(records), oracle(records, only="simple"), SIZES, 0, root=FIXTURES)
    assert d["n"] == len(records) and set(d["correct"]) == {"agent", "untuned"}
    c = pc.claim(d, 0)
    n_multiple = sum(r.category == "multiple" for r in records)
    n_answerable = sum(r.category in ("simple", "multiple") for r in records)
    assert c.kind == Kind.CHECK and abs(c.measured - n_multiple / n_answerable) < 1e-12
    assert c.verdict not in (Verdict.UNINFORMATIVE, Verdict.NOT_CHECKABLE)
    assert "irrelevance questions answered without a call: adapted 1.00, untuned 1.00" in c.note


def test_both_at_the_floor_is_uninformative() -> None:
    prose = ScriptedChatModel(fn=lambda m, t: "No idea.")
    d = pc.measure(prose, ScriptedChatModel(fn=lambda m, t: "No idea."), SIZES, 0, root=FIXTURES)
    assert pc.claim(d, 0).verdict == Verdict.UNINFORMATIVE


def test_missing_data_is_a_not_checkable_claim() -> None:
    c = pc.not_measured("BFCL data needs the Python package 'bfcl-eval'")
    assert c.verdict == Verdict.NOT_CHECKABLE and c.kind == Kind.CHECK and "bfcl-eval" in c.note
