"""Cliff tokens on a real LLM (E172): the SmolLM2 code path, run on a model with a known answer distribution."""

from __future__ import annotations

import pytest

from divelab.interp.cliff_tokens import Problem
from divelab.interp.cliff_tokens.real_llm import RealConfig, add_to, measure, word_problems
from divelab.interp.cliff_tokens.task import chain_tokenizer, last_number
from doubles import KnownModel


def test_real_llm_path_on_a_known_model() -> None:
    from divelab.threads import torch_threads

    tok = chain_tokenizer()
    cfg = RealConfig(problems=1, per_problem=20, n=64, every=1, max_new_tokens=4, temperature=1.0, batch_rows=1024)
    tiny = {"cliff_rate_wrong": 0.75, "cliff_rate_right": 0.0, "wrong": 12, "right": 20, "pass_del": 1.0,
            "pass_keep": 0.1, "interventions": 9, "type_shares": {"deterministic": 0.0, "uncertain": 0.1,
                                                                  "sampled-off": 0.9}, "cliffs": 9}
    with torch_threads(1):
        claims, det = measure(KnownModel(tok), tok, [Problem(":", "1")], cfg, chat=False, checker="exact",
                              label="known", tiny=tiny, seed=0)
    s = det["summary"]
    assert s["traces"] == 20 and s["right"] + s["wrong"] == 20 and 2 <= s["right"] <= 12
    # every wrong response ('0') falls from ~0.3 to 0 at its only token; right ones never fall
    assert s["cliff_rate_wrong"] == 1.0 and s["cliff_rate_right"] == 0.0
    assert s["pass_del"] == 1.0 and s["pass_keep"] == 0.0 and s["interventions"] == s["wrong"]
    assert s["types"] == {"deterministic": 0, "uncertain": s["wrong"], "sampled-off": 0}
    assert [c.statement.split(":")[0] for c in claims] == ["known"] * 3
    rates, iv, taxonomy = claims
    # a perfect split gives every resample the same difference: a zero-width interval rules uninformative
    assert rates.verdict.value == "uninformative" and rates.measured == pytest.approx(1.0)
    assert iv.verdict.value != "not checkable here" and iv.measured == pytest.approx(1.0)
    # continuations at T = 1 are on-policy: a deterministic cliff could only be noise, so the test cannot speak
    assert taxonomy.verdict.value == "uninformative"
    assert "tiny chain model" in rates.baseline and "0.75" in rates.baseline


def test_add_to_says_how_to_install_a_missing_model(monkeypatch) -> None:
    from divelab.claims import Reproduction
    from divelab.lm import real

    rep = Reproduction(system="cliff-tokens", title="t", scale="full", seed=0)
    monkeypatch.setattr(real, "is_available", lambda *a, **k: False)
    add_to(rep, RealConfig())
    assert len(rep.claims) == 1 and rep.claims[0].verdict.value == "not checkable here"
    assert real.INSTALL_HINT in rep.claims[0].note


def test_word_problems_have_checkable_answers() -> None:
    probs = word_problems()
    assert len(probs) == 8 and all(last_number(f"so it is {p.answer}.", p.answer) for p in probs)
    with pytest.raises(ValueError, match="k must be in"):
        word_problems(0)
