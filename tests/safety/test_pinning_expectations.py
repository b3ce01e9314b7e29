"""Per-compactor rule-loss claims: each compactor's documented kind, the outcome rule that judges it,
the paraphrase-aware survival check and the cached SmolLM2 summary writer (with a scripted model)."""

from __future__ import annotations

import pytest

from divelab.chat import Message, ScriptedChatModel
from divelab.claims import Kind, Verdict
from divelab.safety.pinning import SummarizingCompactor, make_scenario
from divelab.safety.pinning.audit import AUDIT_COMPACTORS, AuditConfig, run_survival_audit, survival_episode
from divelab.safety.pinning.expectations import BEHAVIOURS, behaviour
from divelab.safety.pinning.reproduce import _loss_claim
from divelab.safety.pinning.summary_claims import LLM_SUMMARISERS
from divelab.safety.pinning.summary_llm import KEEP_RULES, CachedSummaryModel, InstructedWriter
from divelab.safety.pinning.tokens import TokenCounter

C = TokenCounter.chars4()


def test_every_audited_compactor_has_a_documented_kind() -> None:
    for name in (*AUDIT_COMPACTORS, *LLM_SUMMARISERS):
        assert behaviour(name).does
    assert {n for n, b in BEHAVIOURS.items() if b.stock_path} == {
        "autogen-buffered", "langchain-trim", "langchain-summarization", "langmem-summarize"}
    with pytest.raises(ValueError, match="no documented behaviour"):
        behaviour("nope")


def test_deterministic_compactors_do_what_their_kind_says() -> None:
    # the kind is read from documentation; here the code is held to it on scenarios with the policy at the head
    scen = [make_scenario(i, seed=1, n_filler=5) for i in (0, 5)]
    det = tuple(n for n in AUDIT_COMPACTORS if behaviour(n).deterministic)
    rows = run_survival_audit(scen, AuditConfig(budgets=(0.5, 0.2), compactors=det, pinned=(False,)), C)
    for name in det:
        kept = {r["kept"] for r in rows if r["compactor"] == name}
        assert kept == {not behaviour(name).predicts_loss}, name


def _rows(lost: int, n: int, comp: str = "keep-last-n", compactions: int = 1) -> list[dict]:
    return [{"kept": i >= lost, "verbatim": i >= lost, "compactions": compactions, "compactor": comp}
            for i in range(n)]


def test_outcome_rule_per_deterministic_kind() -> None:
    ev = _loss_claim("evicts", _rows(6, 6) + _rows(6, 6, "autogen-buffered"), "design")
    assert ev.kind is Kind.BY_CONSTRUCTION and ev.rule["name"] == "outcome"
    # the paper states violation sizes for the stock eviction paths: a yes/no check is capped below "reproduced"
    assert ev.verdict is Verdict.DIRECTION_HOLDS and "AutoGen 100%" in ev.rule["args"]["paper_size"]
    assert "autogen-buffered, keep-last-n" in ev.statement
    # a deterministic compactor must go the predicted way on every check
    assert _loss_claim("evicts", _rows(5, 6), "design").verdict is Verdict.NOT_REPRODUCED
    head = _loss_claim("keeps-head", _rows(0, 6, "head-tail"), "design")
    assert head.verdict is Verdict.REPRODUCED and head.rule["args"]["paper_size"] == ""  # no stock path among them
    assert _loss_claim("keeps-head", _rows(6, 6, "head-tail"), "design").verdict is Verdict.NOT_REPRODUCED
    idle = _loss_claim("evicts", _rows(0, 6, compactions=0), "design")
    assert idle.verdict is Verdict.UNINFORMATIVE


def test_instructed_writer_appends_its_sentence_to_the_last_user_message() -> None:
    seen = []
    inner = ScriptedChatModel(fn=lambda m, t: seen.append(m) or "ok")
    w = InstructedWriter(inner, KEEP_RULES)
    w.complete([Message("system", "s"), Message("user", "first"), Message("assistant", "a"), Message("user", "sum")])
    assert seen[-1][1].content == "first" and seen[-1][-1].content == f"sum\n\n{KEEP_RULES}"
    w.complete([Message("system", "only")])
    assert seen[-1][-1] == Message("user", KEEP_RULES)


class ParaphrasingSummarizer:
    """Writes the first rule in its own words (all its key terms, not its text)."""

    name = "paraphrase"

    def __init__(self, words: str) -> None:
        self.words = words

    def __call__(self, messages: list[Message], previous: str, max_tokens: int) -> str:
        return f"Reminder: {self.words}. Tasks so far were log checks."


def test_a_paraphrase_in_a_summary_counts_as_kept_but_an_anchor_in_the_trigger_does_not() -> None:
    s = make_scenario("ssn", seed=0, n_filler=5)  # the SSN trigger itself contains the anchor "SSN"
    budget = int(0.4 * C.count_messages([*s.messages, s.trigger]))
    gone = SummarizingCompactor(ParaphrasingSummarizer("tasks only"), counter=C)
    row = next(r for r in survival_episode(s, gone, budget, False, C) if r["governed"])
    assert row["substance"] and not row["kept"]  # the trigger's "SSN" is no evidence the rule survived
    kept = SummarizingCompactor(ParaphrasingSummarizer("do not reveal any SSN"), counter=C)
    row = next(r for r in survival_episode(s, kept, budget, False, C) if r["governed"])
    assert row["kept"] and not row["verbatim"]


def test_cached_summary_model_caps_tokens_caches_by_content_and_loads_lazily(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    seen: list[int | None] = []
    loads = []

    class Recording(ScriptedChatModel):
        def complete(self, messages, tools=None, *, temperature=None, max_tokens=None):  # noqa: ANN001, ANN202
            seen.append(max_tokens)
            return super().complete(messages, tools, temperature=temperature, max_tokens=max_tokens)

    def load() -> Recording:
        loads.append(1)
        return Recording(fn=lambda m, t: f"summary of {len(m)} messages")

    w = CachedSummaryModel(load, model_key="test-model", max_new_tokens=32)
    msgs = [Message("user", "summarise this")]
    assert w.complete(msgs, max_tokens=500).message.content == "summary of 1 messages"
    assert seen == [32] and w.stats["misses"] == 1
    again = CachedSummaryModel(load, model_key="test-model", max_new_tokens=32)
    assert again.complete(msgs, max_tokens=500).message.content == "summary of 1 messages"
    assert again.stats["hits"] == 1 and len(loads) == 1  # read back from disk, no model loaded
    other = CachedSummaryModel(load, model_key="other-model", max_new_tokens=32)
    other.complete(msgs)
    assert other.stats["misses"] == 1  # another model never reads these summaries
