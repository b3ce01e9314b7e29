"""How a reproduction adds its real-LLM claims (``add_claims_at_full``) and opens a live chat (``live_chat``),
without the model: the measurement and the loader are stand-ins."""

from __future__ import annotations

import pytest

from divelab import verdicts
from divelab.chat import ScriptedChatModel, user
from divelab.claims import Claim, Kind, Reproduction
from divelab.lm import real

STATEMENT = dict(statement="s", paper_value="p", source="src")


def _rep() -> Reproduction:
    return Reproduction(system="t", title="t", scale="", seed=0)


def _measure(calls: list[int]):
    def measure():
        calls.append(1)
        return [Claim("measured", "p", 1.0, kind=Kind.CHECK, ruling=verdicts.outcome(True, test="ran"))], {"n": 1}
    return measure


def test_the_sub_plan_decides_whether_the_real_llm_runs(monkeypatch):
    monkeypatch.setattr(real, "is_available", lambda name=real.SMOLLM2: True)
    calls: list[int] = []
    rep = _rep()
    real.add_claims_at_full(rep, False, _measure(calls), **STATEMENT)
    assert calls == [] and rep.claims == []
    real.add_claims_at_full(rep, True, _measure(calls), **STATEMENT, details_key="here")
    assert calls == [1] and [c.statement for c in rep.claims] == ["measured"] and rep.details["here"] == {"n": 1}


def test_a_scale_name_is_refused_rather_than_read_as_true():
    calls: list[int] = []
    with pytest.raises(TypeError, match="run must be True or False"):
        real.add_claims_at_full(_rep(), "quick", _measure(calls), **STATEMENT)
    assert calls == []


def test_a_missing_model_is_one_not_checkable_claim_with_the_install_command(monkeypatch):
    monkeypatch.setattr(real, "is_available", lambda name=real.SMOLLM2: False)
    calls: list[int] = []
    rep = _rep()
    real.add_claims_at_full(rep, True, _measure(calls), **STATEMENT)
    assert calls == [] and len(rep.claims) == 1
    assert rep.claims[0].verdict.value == "not checkable here" and real.INSTALL_HINT in rep.claims[0].note


def test_live_chat_uses_a_given_chat_model_and_loads_nothing(monkeypatch):
    def no_load(*a, **k):
        raise AssertionError("a given chat model must not load SmolLM2")

    monkeypatch.setattr(real, "load_real", no_load)
    chat = ScriptedChatModel(fn=lambda messages, tools: "ok")
    with real.live_chat(chat, max_new_tokens=3) as (got, tokenizer):
        assert got is chat and tokenizer is None
        assert got.complete([user("hi")]).message.content == "ok"


def test_live_chat_builds_the_in_process_chat_model_from_the_loaded_model(monkeypatch):
    torch = pytest.importorskip("torch")
    from divelab.chat.hf_local import HFChatModel

    model, tok = object(), type("Tok", (), {"chat_template": "{{ messages }}"})()
    monkeypatch.setattr(real, "load_real", lambda *a, **k: (model, tok))
    before = torch.get_num_threads()
    with real.live_chat(None, max_new_tokens=7, seed=3) as (chat, tokenizer):
        assert isinstance(chat, HFChatModel) and chat.model is model and tokenizer is tok
        assert (chat.max_new_tokens, chat.seed) == (7, 3)
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
