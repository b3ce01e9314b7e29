"""Test doubles shared across test themes (importable as ``doubles``: tests/ is on sys.path via its conftest)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch


class CharTokenizer:
    """A minimal tokenizer with a chat template (one token per character)."""

    pad_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 60 + 2 for c in text]

    def apply_chat_template(self, msgs, add_generation_prompt=True, tokenize=True):
        return self.encode("".join(f"{m['role']}:{m['content']}\n" for m in msgs) + "assistant:")


class KnownModel(torch.nn.Module):
    """After ':' it writes '1' with probability 0.3 and '0' with 0.7; after a digit it ends (eos)."""

    def __init__(self, tok, p_one: float = 0.3):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.config = SimpleNamespace(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        v = len(tok)
        self.table = torch.full((v, v), -1e9)
        colon, zero, one, eos = (tok.convert_tokens_to_ids(t) for t in (":", "0", "1", "<eos>"))
        self.table[colon, one], self.table[colon, zero] = math.log(p_one), math.log(1 - p_one)
        for d in "0123456789":
            self.table[tok.convert_tokens_to_ids(d), eos] = 0.0
        self.table[eos, eos] = 0.0
        self.table[tok.pad_token_id, eos] = 0.0

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=False):
        # ``cache``: the KV-cache argument and output of transformers models (``past_key_values`` before 5.x)
        return SimpleNamespace(logits=self.table[input_ids] + 0 * self.w, cache=None)


def tiny_chain_checkpoint(path):
    """A tiny Llama with the chain task's character tokenizer, saved at ``path`` as a Hugging Face checkpoint
    directory (what a user passes as a model path)."""
    from divelab.interp.cliff_tokens.task import chain_tokenizer
    from divelab.lm.models import build_model

    tok = chain_tokenizer()
    model = build_model("tiny-100k", vocab_size=len(tok), seed=0, max_position_embeddings=64)
    model.config.eos_token_id, model.config.pad_token_id = tok.eos_token_id, tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
