"""The SmolLM2-judge code path of E178, on a tiny random model and on a scripted scorer (no SmolLM2)."""

import zlib

import numpy as np
import pytest

from divelab.claims import Reproduction
from divelab.selfimprove.red_queen import real_llm
from divelab.selfimprove.red_queen.real_llm import (
    LEVELS,
    PROMPTS,
    LLMJudge,
    LogprobScorer,
    RoundConfig,
    claims_from_round,
    matched_pairs,
    render,
    run_round,
)
from divelab.selfimprove.red_queen.world_synthetic import SyntheticWorld
from doubles import CharTokenizer


class ScriptedScorer:
    """Margins from the rendered ratings; the plain prompt also likes the AI voice (a planted bias)."""

    def __init__(self):
        self.calls = 0

    def margins(self, prompt, texts, desc=""):
        self.calls += len(texts)
        out = []
        for t in texts:
            words = [s.split(": ")[1].rstrip(".") for s in t.split("\n")[1].split(". ")]
            m = 0.5 * (sum(LEVELS.index(w) for w in words) - 8)
            if prompt == PROMPTS["plain"]:
                m += 1.5 * any(v in t for v in real_llm.AI_VOICE) - 0.5
            out.append(m)
        return np.array(out)


def test_render_matched_pairs_differ_only_in_the_voice():
    pairs = matched_pairs(SyntheticWorld(seed=3), 6, stream=1)
    for ai, hu, _, v in pairs:
        a, h = render(ai, v).split("\n"), render(hu, v).split("\n")
        assert a[1:] == h[1:] and a[0] != h[0]
        assert any(s in a[0] for s in real_llm.AI_VOICE) and any(s in h[0] for s in real_llm.HUMAN_VOICE)
    x = np.zeros(7)
    x[:4] = [-1.0, 0.0, 0.3, 2.0]
    assert "Correctness: very poor. Clarity: poor. Evidence: fair. Completeness: excellent." in render(x)


def test_logprob_scorer_batching_and_padding_do_not_change_margins():
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=1024)).eval()
    texts = ["short", "a much longer submission text here", "mid length text"]
    one = LogprobScorer(model, CharTokenizer(), answers=("Y", "N"), batch_size=1).margins("sys", texts)
    batched = LogprobScorer(model, CharTokenizer(), answers=("Y", "N"), batch_size=8)
    m = batched.margins("sys", texts + texts[:1])
    np.testing.assert_allclose(m[:3], one, atol=1e-4)
    assert m[3] == m[0] and batched.forwards == 3  # cached, deduplicated
    with pytest.raises(ValueError, match="distinct first tokens"):
        LogprobScorer(model, CharTokenizer(), answers=("Yes", "Yeah"))


def test_round_replaces_the_biased_judge_and_removes_its_source_bias():
    scorer = ScriptedScorer()
    res = run_round(scorer, RoundConfig(task_pairs=16, anchor_pairs=24, eval_pairs=40), seed=0)
    claims, details = claims_from_round(res, config="test")
    before, after = details["before"], details["after"]
    assert before["accept_ai"] > before["accept_human"] + 0.2  # the planted bias is measured
    assert res["decision"].replace and details["after_judge"][0] != "plain"
    assert after["accept_ai"] == pytest.approx(after["accept_human"])  # the content-only judge is unbiased
    assert after["accuracy"] >= before["accuracy"]
    assert len(claims) == 4 and claims[0].measured > 1.2 and claims[2].measured == pytest.approx(1.0)
    assert claims[1].measured == pytest.approx(1.5) and before["quality_auroc"] > 0.8
    assert details["anchor_discrimination"]["before"]["discriminates"]
    # the bias claim carries a falsifier, its sham-voice control (no effect) and its unit
    ctl = claims[0].rule["args"]["control"]
    assert claims[0].falsifier and ctl["name"] == real_llm.SHAM and ctl["ci"][0] <= 1.0 <= ctl["ci"][1]
    assert claims[0].replication == {"unit": "fresh matched AI/human pairs", "n": 40, "clustered_by": ""}
    x = np.zeros(7)
    x[:4] = 1.0  # all "excellent": margin 0.5 * (16 - 8) = 4
    assert LLMJudge(scorer, "content_only", threshold=3.9).accepts(x)
    assert not LLMJudge(scorer, "content_only", threshold=4.1).accepts(x)


class ShiftedScorer(ScriptedScorer):
    """The scripted margins moved up by 5 nats: every item gets Yes over No, as SmolLM2 gives."""

    def margins(self, prompt, texts, desc=""):
        return super().margins(prompt, texts, desc) + 5.0


class BlindScorer:
    """Margins that ignore the ratings (a fixed pseudo-random number per text), all positive."""

    def margins(self, prompt, texts, desc=""):
        return np.array([1.0 + (zlib.crc32((prompt + t).encode()) % 1000) / 1000 for t in texts])


def test_the_incumbent_threshold_is_calibrated_not_zero():
    # threshold 0 would accept every item of a judge whose Yes always beats No; calibrated on the judge-task
    # pairs (held out from the anchor and the fresh pairs), the judge accepts some items and not others
    res = run_round(ShiftedScorer(), RoundConfig(task_pairs=16, anchor_pairs=24, eval_pairs=40), seed=0)
    assert res["incumbent"]["threshold"] > 2.0
    before = res["eval"]["before"]
    assert 0 < np.concatenate([before["accept_ai"], before["accept_human"]]).mean() < 1
    assert before["accuracy"] > 0.7


def test_a_judge_that_cannot_discriminate_drives_no_acceptance_claim():
    res = run_round(BlindScorer(), RoundConfig(task_pairs=16, anchor_pairs=24, eval_pairs=40), seed=0)
    claims, details = claims_from_round(res, config="test")
    disc = details["anchor_discrimination"]["before"]
    assert not disc["discriminates"] and disc["auroc_ci"][0] <= 0.5
    ratio = next((c for c in claims if "acceptance ratio" in c.statement), None)
    if ratio is not None:  # None: the ratio itself was undefined
        assert ratio.verdict.value == "uninformative" and "AUROC" in ratio.reason
    # the round kept the incumbent: the judge in office after is the same judge, not a second claim
    assert not res["decision"].replace
    assert not any("after" in c.statement for c in claims) and "no second claim" in details["round"]


def test_the_plan_sizes_the_round_at_full_scale_only(monkeypatch):
    from divelab import plans
    from divelab.lm import real
    from divelab.selfimprove.red_queen import reproduce

    assert reproduce.PLANS["smoke"].real_llm is None and reproduce.PLANS["quick"].real_llm is None
    assert reproduce.PLANS["full"].real_llm == RoundConfig()
    plan = plans.resolve(reproduce, "full", {"real_llm.eval_pairs": "60"})
    assert plan.real_llm.eval_pairs == 60 and plans.to_dict(plan)["real_llm"]["eval_pairs"] == 60
    rep = Reproduction(system="red-queen", title="t", scale="quick", seed=0, setup="s")
    real_llm.add_to(rep, None, 0)  # no sub-plan: nothing runs
    assert not rep.claims
    seen = []
    monkeypatch.setattr(real, "is_available", lambda *a, **k: True)
    monkeypatch.setattr(real_llm, "measure", lambda cfg, seed: (seen.append(cfg), ([], {"ok": 1}))[1])
    real_llm.add_to(rep, plan.real_llm, 0)
    assert seen == [plan.real_llm] and rep.details["smollm2_judge"] == {"ok": 1}
