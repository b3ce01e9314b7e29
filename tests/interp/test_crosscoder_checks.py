"""The crosscoder refuses a pair of different architectures at the start, and warns when every feature it
ranks is dead (d = 0, AUROC 0.5) instead of printing them as findings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from divelab.interp.crosscoder import diff as diff_mod
from divelab.interp.crosscoder.dfc import CrosscoderConfig
from divelab.interp.crosscoder.harvest import check_pair
from divelab.interp.crosscoder.ranking import RankedFeature, is_dead
from hf_tiny import bpe_tokenizer, tiny_gpt2


def tiny_llama(tok, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    eos = tok.eos_token_id
    return LlamaForCausalLM(LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=512,
                                        vocab_size=len(tok), eos_token_id=eos, bos_token_id=eos,
                                        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos)).eval()


def test_a_pair_of_different_architectures_of_one_width_is_refused():
    tok = bpe_tokenizer()
    llama, gpt2 = tiny_llama(tok), tiny_gpt2(tok)
    assert llama.config.hidden_size == gpt2.config.hidden_size  # only the architecture differs
    with pytest.raises(ValueError, match="architectures differ: llama .* vs gpt2"):
        check_pair(llama, gpt2, tok, tok)
    check_pair(tiny_gpt2(tok, seed=1), gpt2, tok, tok)  # a model and its sibling of one architecture pass


def test_diff_models_warns_when_every_ranked_feature_is_dead(monkeypatch):
    tok = bpe_tokenizer()
    base, sibling = tiny_gpt2(tok, seed=0), tiny_gpt2(tok, seed=1)
    texts = [f"def f{i}(x): return x + {i}" for i in range(8)]
    labels = np.array([0, 1] * 4)
    dead = [RankedFeature(i, "A", 0.0, 0.5, 0.0, 0.5) for i in range(2)]
    monkeypatch.setattr(diff_mod, "rank_features", lambda *a, **k: dead)
    with pytest.warns(UserWarning, match="every ranked feature is dead"):
        diff_mod.diff_models(base, sibling, tok, tok, texts, labels, layer=1, top=2,
                             config=CrosscoderConfig(dict_size=16, k=2, excl_share=0.25, steps=2, batch_size=8))
    alive = [RankedFeature(0, "A", 0.4, 0.6, 0.1, 0.9), *dead[1:]]
    monkeypatch.setattr(diff_mod, "rank_features", lambda *a, **k: alive)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        diff_mod.diff_models(base, sibling, tok, tok, texts, labels, layer=1, top=2,
                             config=CrosscoderConfig(dict_size=16, k=2, excl_share=0.25, steps=2, batch_size=8))
    assert is_dead(dead[0]) and not is_dead(alive[0])
