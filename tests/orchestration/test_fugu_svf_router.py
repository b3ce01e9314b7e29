"""The router's SVF backbone (svf_router.py) on a tiny random Llama: the SVD is exact at zero offsets, only the
offsets and the head train, and the claims are judged against the strongest arm with the shuffled-label control."""

import numpy as np
import pytest

from divelab.claims import Kind
from divelab.orchestration.fugu import svf_router
from divelab.orchestration.fugu.matched import majority_vote
from divelab.verdicts import Verdict

torch = pytest.importorskip("torch")


def tiny_llama(layers: int = 3, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                                        num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=256)).eval()


def test_svf_linear_is_the_weight_at_zero_offsets_and_keeps_the_singular_value_sum():
    lin = torch.nn.Linear(12, 7)
    s = svf_router.SVFLinear(lin)
    x = torch.randn(5, 12)
    assert torch.allclose(s(x), lin(x), atol=1e-5)
    with torch.no_grad():
        s.delta.copy_(torch.linspace(-0.5, 0.5, s.delta.numel()))
    assert not torch.allclose(s(x), lin(x), atol=1e-3)
    assert float(s.sigma().sum()) == pytest.approx(float(s.s.sum()), rel=1e-5)


def test_backbone_matches_the_model_and_trains_only_offsets_and_head():
    model = tiny_llama()
    ids = [[1, 5, 9, 3], [2, 7, 4, 4], [3, 3, 8, 1, 6]]
    with torch.no_grad():
        ref = [model.model(input_ids=torch.tensor([i])).last_hidden_state[0, -1] for i in ids]
    bb = svf_router.SVFBackbone(model, 2)
    trunk = bb.trunk(ids)
    with torch.no_grad():
        got = [bb.features(t[None])[0] for t in trunk]
    for a, b in zip(got, ref, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    # 2 layers x (q 32 + k 16 + v 16 + o 32 + gate 32 + up 32 + down 32) singular values
    assert bb.n_offsets == 2 * (32 + 16 + 16 + 32 + 32 + 32 + 32)
    assert not any(p.requires_grad for p in model.parameters())
    rbar = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    cfg = svf_router.SVFConfig(epochs=15, lr=0.05, batch=2)
    head, curve = svf_router.train_router(bb, trunk, rbar, 2, cfg, seed=0)
    assert curve[-1] < curve[0] and head.shape == (2, 32)
    assert any(float(d.abs().max()) > 0 for d in bb.offsets())
    svf_router.train_router(bb, trunk, rbar, 2, cfg, seed=0, adapt=False)
    assert all(float(d.abs().max()) == 0 for d in bb.offsets())  # the frozen arm never moves the offsets
    bb.restore()
    with torch.no_grad():
        again = model.model(input_ids=torch.tensor([ids[0]])).last_hidden_state[0, -1]
    assert torch.allclose(again, ref[0], atol=1e-5)


def _runs(svf_gain: float, shuffled_gain: float, k: int = 4) -> list[dict]:
    rng = np.random.default_rng(0)
    arms = ("SVF backbone", *svf_router.CHEAP, *svf_router.TRIVIAL, "frozen backbone", "SVF, shuffled labels",
            "frozen, shuffled labels", "oracle")
    out = []
    for _ in range(k):
        base = {a: (rng.random(200) < 0.6).astype(float) for a in arms}
        base["SVF backbone"] = (rng.random(200) < 0.6 + svf_gain).astype(float)
        base["SVF, shuffled labels"] = (rng.random(200) < 0.6 + shuffled_gain).astype(float)
        out.append({"arms": base})
    return out


def test_claims_go_against_the_strongest_arm_and_the_shuffled_control_can_sink_them():
    cfg = svf_router.SVFConfig()
    good = svf_router.claims(_runs(0.3, -0.3), 6528, 2880, cfg, seed=0)
    assert good[0].kind is Kind.EMPIRICAL and good[0].verdict is Verdict.DIRECTION_HOLDS
    assert good[0].audit_gaps() == [] and "19,456" in good[0].note and "9408" in good[0].note
    sham = svf_router.claims(_runs(0.3, 0.3), 6528, 2880, cfg, seed=0)
    assert sham[0].verdict is Verdict.UNINFORMATIVE  # the control showed the effect too
    none = svf_router.claims(_runs(0.0, 0.0), 6528, 2880, cfg, seed=0)
    assert none[0].verdict is not Verdict.DIRECTION_HOLDS


def test_majority_vote_takes_the_most_common_answer_and_pays_every_worker():
    answers = np.array([["4", "5", "4"], ["1", "2", "3"]])
    rewards = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    cost = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    r, c = majority_vote(answers, rewards, cost)
    assert r.tolist() == [1.0, 0.0] and c.tolist() == [6.0, 3.0]  # a three-way tie goes to the first worker


def test_one_measurement_one_claim_when_the_frozen_backbone_is_strongest():
    runs = _runs(0.2, -0.3)
    for r in runs:
        r["arms"]["frozen backbone"] = np.full(200, 0.75)
    out = svf_router.claims(runs, 6528, 2880, svf_router.SVFConfig(), seed=0)
    assert out[0].compared_with == "frozen backbone" and len(out) == 1
