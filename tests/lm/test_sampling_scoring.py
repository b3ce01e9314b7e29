"""Seeded sampling (temperature, top-p, greedy, eos) and log-prob scoring against manual sums."""

from __future__ import annotations

import math

import pytest
import torch

from divelab.lm.models import build_model
from divelab.lm.sampling import filter_logits, generate
from divelab.lm.scoring import continuation_logprob, sequence_logprobs, token_logprobs


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = build_model("tiny-100k", 50, seed=3)
    with torch.no_grad():  # sharper than a fresh init, so greedy/top-p differ visibly from sampling
        m.lm_head.weight.mul_(8.0)
    return m


PROMPT = [3, 14, 15, 9, 2]


def test_generation_uses_no_deprecated_transformers_argument(model, recwarn):
    """The cached decoding loop passes its KV cache as ``cache=`` (``past_key_values=`` is deprecated)."""
    generate(model, [PROMPT, PROMPT[:2]], max_new_tokens=3, temperature=0)
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)], [str(w.message) for w in recwarn]


def test_sampling_is_deterministic_for_a_seed(model):
    a = generate(model, PROMPT, max_new_tokens=12, temperature=1.0, seed=7)
    b = generate(model, PROMPT, max_new_tokens=12, temperature=1.0, seed=7)
    others = [generate(model, PROMPT, max_new_tokens=12, seed=s).tokens[0] for s in range(8, 12)]
    assert a.tokens == b.tokens and a.logprobs == b.logprobs and len(a.tokens[0]) == 12
    assert any(o != a.tokens[0] for o in others)


def test_greedy_matches_hf_generate_and_uses_the_cache_correctly(model):
    ours = generate(model, PROMPT, max_new_tokens=10, greedy=True, eos_token_id=None).tokens[0]
    hf = model.generate(torch.tensor([PROMPT]), max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert ours == hf[0, len(PROMPT):].tolist()
    # left-padded batch gives each row what it gets alone
    short = [7, 8]
    both = generate(model, [PROMPT, short], max_new_tokens=10, greedy=True)
    assert both.tokens[0] == ours
    assert both.tokens[1] == generate(model, short, max_new_tokens=10, greedy=True).tokens[0]
    # temperature 0 is greedy; tiny top_p is greedy too
    assert generate(model, PROMPT, max_new_tokens=10, temperature=0).tokens[0] == ours
    assert generate(model, PROMPT, max_new_tokens=10, top_p=1e-6, seed=5).tokens[0] == ours


def test_reported_logprobs_equal_scoring(model):
    g = generate(model, PROMPT, max_new_tokens=6, seed=1)
    with torch.no_grad():
        scored = continuation_logprob(model, [PROMPT], g.tokens, reduce="none")[0]
    assert scored.tolist() == pytest.approx(g.logprobs[0], abs=1e-4)


def test_eos_stops_generation(model):
    greedy = generate(model, PROMPT, max_new_tokens=10, greedy=True).tokens[0]
    eos = greedy[3]
    g = generate(model, PROMPT, max_new_tokens=10, greedy=True, eos_token_id=eos)
    assert g.tokens[0] == greedy[: greedy.index(eos) + 1] and g.finished == [True]


def test_top_p_keeps_the_nucleus_only():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(filter_logits(logits, top_p=0.7))
    assert kept.tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.8)).sum() == 2  # 0.5 + 0.3 reaches 0.8
    assert torch.isfinite(filter_logits(logits, top_p=0.81)).sum() == 3
    assert torch.isfinite(filter_logits(logits, top_p=1e-9)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(filter_logits(logits, top_k=3)).sum() == 3


def test_top_p_sampling_never_leaves_the_nucleus(model):
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT])).logits[0, -1]
    allowed = set(torch.nonzero(torch.isfinite(filter_logits(logits[None], top_p=0.5))[0]).flatten().tolist())
    firsts = {generate(model, PROMPT, max_new_tokens=1, top_p=0.5, seed=s).tokens[0][0] for s in range(40)}
    assert firsts <= allowed


def test_bad_sampling_arguments(model):
    with pytest.raises(ValueError, match="top_p must be in"):
        generate(model, PROMPT, top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, PROMPT, temperature=-1)
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [PROMPT, []])


def test_scoring_equals_a_manual_computation(model):
    prompt, cont = [1, 2, 3], [4, 5]
    full = prompt + cont
    manual = 0.0
    with torch.no_grad():
        for t in range(len(prompt), len(full)):
            logits = model(torch.tensor([full[:t]])).logits[0, -1]
            manual += torch.log_softmax(logits, -1)[full[t]].item()
        total = continuation_logprob(model, [prompt, [9]], [cont, [8, 7, 6, 5]])
        mean = continuation_logprob(model, [prompt], [cont], reduce="mean")
        assert total[0].item() == pytest.approx(manual, abs=1e-4)
        assert mean[0].item() == pytest.approx(manual / 2, abs=1e-4)
        # padding does not change a row's scores
        padded = sequence_logprobs(model, [full, [9, 8, 7, 6, 5, 4, 3, 2]])[0]
        alone = sequence_logprobs(model, [full])[0]
        assert torch.allclose(padded, alone, atol=1e-5)
        ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
        lp = token_logprobs(model, ids, torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]))
        assert lp.shape == (2, 3) and lp[0, 2] == 0 and lp[1, 1] == 0 and lp[1, 0] < 0
    assert math.isfinite(total[1].item())


def test_scoring_shape_errors(model):
    with pytest.raises(ValueError, match="pair up"):
        continuation_logprob(model, [[1]], [[2], [3]])
    with pytest.raises(ValueError, match="attention_mask shape"):
        token_logprobs(model, torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 3))
    with pytest.raises(ValueError, match="right-padded"):
        token_logprobs(model, torch.zeros(1, 3, dtype=torch.long), torch.tensor([[0, 1, 1]]))
    with pytest.raises(ValueError, match="reduce"):
        continuation_logprob(model, [[1]], [[2]], reduce="max")
