"""A drafter whose head scores a reduced vocabulary: still lossless, same loss, saved and loaded whole."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from divelab.lm.models import build_model
from divelab.serving.dspark import (
    Drafter,
    DrafterConfig,
    Request,
    SpecEngine,
    load_drafter,
    plain_greedy,
    save_drafter,
)
from divelab.serving.dspark.sps import SPSCurve
from divelab.serving.dspark.training import DrafterTrainConfig, dspark_loss, position_weights

SPS = SPSCurve.synthetic_accelerator(0.01, 8)


@pytest.fixture(scope="module")
def target():
    return build_model("tiny-100k", 41, seed=1).double()


def _reduced(target, kind: str, ids: list[int], gamma: int = 4) -> Drafter:
    torch.manual_seed(0)
    d = Drafter.for_target(target, DrafterConfig(kind=kind, gamma=gamma, window=8, rank=8, draft_vocab=len(ids)))
    return d.set_draft_vocab(ids).double()


def test_greedy_output_is_plain_greedy_whatever_the_draft_vocabulary(target):
    prompt = [3, 17, 5, 9, 1]
    ref = plain_greedy(target, prompt, 12)
    for kind in ("parallel", "markov", "rnn", "ar"):
        for ids in ([0, 1, 2, 3, 4], sorted(set(ref))[:3] + [40]):  # misses most tokens / hits some
            d = _reduced(target, kind, ids)
            out = SpecEngine(target, d, "fixed", sps=SPS, engine="hf").generate(prompt, 12)
            assert out == ref, (kind, ids)
            drafts = d.draft(torch.zeros(1, 8, d.config.hidden_size, dtype=torch.double),
                             torch.ones(1, 8, dtype=torch.bool), torch.tensor([3]), 0.0)
            assert set(drafts.tokens.flatten().tolist()) <= set(ids)  # drafts come from the reduced set


def test_sampling_stays_exact_when_the_draft_cannot_propose_half_the_tokens():
    v = 4
    tgt = build_model("tiny-100k", v, seed=4).double()
    with torch.no_grad():
        tgt.model.norm.weight.mul_(8.0)
    prompt = [1, 2, 3]
    seqs = list(itertools.product(range(v), repeat=3))
    with torch.no_grad():
        logp = torch.log_softmax(tgt(torch.tensor([prompt + list(s) for s in seqs])).logits.double(), -1)
    exact = np.exp([float(sum(logp[i, 2 + k, s[k]] for k in range(3))) for i, s in enumerate(seqs)])
    d = _reduced(tgt, "markov", [0, 2], gamma=2)
    eng = SpecEngine(tgt, d, "dspark", sps=SPSCurve.synthetic_accelerator(0.01, 100_000, max_b=8), temperature=1.0,
                     seed=0, engine="hf")
    n = 800
    res = eng.serve([Request(prompt, 3, rid=i) for i in range(n)], max_batch=200)
    counts = np.zeros(len(seqs))
    for out in res.outputs.values():
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    assert sum(s.accepted.sum() for s in res.steps) > 0
    assert counts[[i for i, s in enumerate(seqs) if 1 in s or 3 in s]].sum() > 0  # unproposable tokens still occur
    big = exact * n >= 5
    obs, exp = np.append(counts[big], counts[~big].sum()), np.append(exact[big], exact[~big].sum()) * n
    assert chisquare(obs, exp).pvalue > 1e-3


def test_reduced_loss_equals_the_full_loss_of_a_draft_that_is_zero_outside_the_set(target):
    torch.manual_seed(3)
    ids = [0, 5, 7, 11, 30]
    d = _reduced(target, "markov", ids).float()
    n, g, v = 6, 4, 41
    sub = torch.randn(n, g, len(ids))
    full = torch.full((n, g, v), float("-inf"))
    full[..., ids] = sub
    conf, tgt_logits = torch.randn(n, g), torch.randn(n, g, v)
    tokens = torch.tensor(ids)[torch.randint(0, len(ids), (n, g))]
    w, cfg = position_weights(g, None), DrafterTrainConfig(ce_weight=0.1)
    reduced, proxy_r = dspark_loss(sub, conf, tgt_logits, tokens, w, cfg, d)
    reference, proxy_f = dspark_loss(full, conf, tgt_logits, tokens, w, cfg)
    assert torch.allclose(reduced, reference) and torch.allclose(proxy_r, proxy_f)
    outside = tokens.clone()
    outside[0, 0] = 1  # not in the set: the CE term skips it instead of taking log 0
    assert torch.isfinite(dspark_loss(sub, conf, tgt_logits, outside, w, cfg, d)[0])


def test_the_draft_vocabulary_is_saved_and_checked(target, tmp_path):
    d = _reduced(target, "markov", [4, 2, 9])
    save_drafter(d, tmp_path / "d")
    back, _ = load_drafter(tmp_path / "d", target)
    assert back.vocab_ids.tolist() == [4, 2, 9] and back.reduced
    with pytest.raises(ValueError, match="need 3 distinct token ids"):
        d.set_draft_vocab([1, 1, 2])
    with pytest.raises(ValueError, match=r"ids must lie in 0\.\.40"):
        d.set_draft_vocab([1, 2, 41])
    with pytest.raises(ValueError, match=r"draft_vocab must be 0 \(the whole vocabulary\) or 1\.\.41"):
        Drafter.for_target(target, DrafterConfig(draft_vocab=42))
