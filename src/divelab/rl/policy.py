"""A causal LM as a command-choosing policy: score each admissible command by its log-probability.

``log pi(a | ctx) = log_softmax_a( sum_tokens log p_LM(a_tokens, <eos> | ctx, <sep>) )`` over the
admissible candidates, the way LLM agents on ALFWorld/TextWorld are usually scored. Any HF causal
LM works (``model(input_ids, attention_mask).logits``), with its own Hugging Face tokenizer (``<sep>``,
``<eos>`` and padding map to that tokenizer's special tokens, see :mod:`divelab.rl.tokens`), also wrapped
in peft LoRA adapters. The default here is a tiny divelab Llama (:func:`divelab.lm.models.build_model`)
with a word-level tokenizer trained with ``tokenizers`` on the games' own text (observations and
commands), so nothing is downloaded.

The context is the last ``history`` (action, observation) pairs and the current observation,
each passed through ``view`` (an optional observation-to-text function, e.g. TextWorld's
:func:`~divelab.envs.textworld.compact_view`, which keeps the feedback, room name and inventory and
drops flavour text), optionally prefixed by the first observation (``include_first``, which
carries the quest), and truncated in token space to ``head_tokens`` from the start and
``tail_tokens`` from the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from divelab.rl.tokens import as_tokens

SPECIALS = ["[PAD]", "[UNK]", "[SEP]", "[EOS]"]


def train_word_tokenizer(texts: Iterable[str], vocab_size: int = 2000) -> Tokenizer:
    """A lower-cased word-level tokenizer (``tokenizers`` WordLevel) over the given texts.
    Words it never saw become ``[UNK]`` (e.g. the control variant's session ids)."""
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                              min_frequency=1))
    return tok


@dataclass
class PolicyConfig:
    history: int = 1  # earlier (action, observation) pairs shown before the current observation
    include_first: bool = False  # prefix the first observation (the quest)
    head_tokens: int = 32
    tail_tokens: int = 64
    batch_rows: int = 512  # (context, candidate) rows per forward pass


class LMPolicy:
    """Wraps a causal LM (plain or peft-wrapped) and its tokenizer: a ``tokenizers.Tokenizer`` that has
    ``[PAD] [SEP] [EOS]`` (:func:`train_word_tokenizer`) or any Hugging Face tokenizer with an eos token."""

    def __init__(self, model: torch.nn.Module, tokenizer: Tokenizer | Any, config: PolicyConfig | None = None,
                 view: Callable[[str], str] | None = None) -> None:
        self.model = model
        self.view = view or (lambda obs: obs)
        self.tokenizer = tokenizer
        self.tokens = as_tokens(tokenizer)
        self.config = config or PolicyConfig()
        self.pad_id, self.sep_id, self.eos_id = self.tokens.pad_id, self.tokens.sep_id, self.tokens.eos_id
        self._probs_cache: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._enc_cache: dict[str, list[int]] = {}

    # -- Policy protocol -------------------------------------------------------------------
    def context(self, observations: Sequence[str], actions: Sequence[str]) -> str:
        if len(actions) != len(observations) - 1:
            raise ValueError(f"need len(actions) == len(observations) - 1, got {len(actions)} and {len(observations)}")
        n = len(observations)
        start = max(0, n - 1 - self.config.history)
        parts = [self.view(observations[0])] if self.config.include_first and start > 0 else []
        for i in range(start, n):
            if i > start:
                parts.append(f"> {actions[i - 1]}")
            parts.append(self.view(observations[i]))
        return " ".join(parts)

    @torch.no_grad()
    def action_probs(self, context: str, candidates: Sequence[str]) -> np.ndarray:
        """Candidate probabilities; memoised until :meth:`invalidate` (called after each update),
        because the G rollouts of a game revisit the same contexts many times."""
        key = (context, tuple(candidates))
        hit = self._probs_cache.get(key)
        if hit is None:
            lp = self.candidate_logprobs([context], [list(candidates)])[0]
            hit = lp.exp().double().numpy()
            self._probs_cache[key] = hit
        return hit

    @torch.no_grad()
    def batch_action_probs(self, contexts: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """:meth:`action_probs` for many pairs: the ones not memoised yet are scored in one
        batched pass (duplicates once), which is what lockstep samplers call each step."""
        keys = [(c, tuple(k)) for c, k in zip(contexts, candidates, strict=True)]
        todo = list(dict.fromkeys(k for k in keys if k not in self._probs_cache))
        if todo:
            lps = self.candidate_logprobs([k[0] for k in todo], [list(k[1]) for k in todo])
            for k, lp in zip(todo, lps, strict=True):
                self._probs_cache[k] = lp.exp().double().numpy()
        return [self._probs_cache[k] for k in keys]

    def invalidate(self) -> None:
        self._probs_cache.clear()

    # -- scoring ----------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        ids = self._enc_cache.get(text)
        if ids is None:
            ids = self.tokens.encode(text)
            if len(self._enc_cache) > 200_000:
                self._enc_cache.clear()
            self._enc_cache[text] = ids
        return ids

    def _context_ids(self, context: str) -> list[int]:
        ids = self._encode(context)
        h, t = self.config.head_tokens, self.config.tail_tokens
        return ids if len(ids) <= h + t else ids[:h] + ids[-t:]

    def candidate_logprobs(self, contexts: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """For each context, ``log pi(candidate | context)`` over its candidates (differentiable
        when called with grad enabled)."""
        if len(contexts) != len(candidates):
            raise ValueError(f"{len(contexts)} contexts but {len(candidates)} candidate lists")
        rows: list[tuple[list[int], int]] = []  # (ids, number of scored tokens at the end)
        owner: list[int] = []
        for ci, (ctx, cands) in enumerate(zip(contexts, candidates, strict=True)):
            if not cands:
                raise ValueError(f"context {ci} has no candidates")
            cids = self._context_ids(ctx) + [self.sep_id]
            for c in cands:
                tail = self._encode(c) + [self.eos_id]
                rows.append((cids + tail, len(tail)))
                owner.append(ci)
        scores = torch.cat([self._score_rows(rows[i:i + self.config.batch_rows])
                            for i in range(0, len(rows), self.config.batch_rows)])
        out: list[torch.Tensor] = []
        start = 0
        for cands in candidates:
            out.append(torch.log_softmax(scores[start:start + len(cands)], dim=0))
            start += len(cands)
        return out

    def _score_rows(self, rows: list[tuple[list[int], int]]) -> torch.Tensor:
        """Sum of log-probs of the last ``n`` tokens of each row (right-padded batch)."""
        width = max(len(ids) for ids, _ in rows)
        device = next(self.model.parameters()).device
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        score_mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, (ids, n) in enumerate(rows):
            input_ids[r, :len(ids)] = torch.tensor(ids)
            attn[r, :len(ids)] = 1
            score_mask[r, len(ids) - n:len(ids)] = True
        input_ids, attn, score_mask = input_ids.to(device), attn.to(device), score_mask.to(device)
        targets = input_ids[:, 1:]
        pred_mask = score_mask[:, 1:]  # position t predicts token t + 1
        split = _body_and_plain_head(self.model)
        if split is not None:
            # project only the positions that are scored (a few per row) through the LM head:
            # the same numbers as full logits, without the (rows x width x vocab) tensor
            body, head = split
            hidden = body(input_ids=input_ids, attention_mask=attn).last_hidden_state[:, :-1]
            rows_i, cols_i = pred_mask.nonzero(as_tuple=True)
            logits = head(hidden[rows_i, cols_i]).float()
            tok_lp = torch.log_softmax(logits, dim=-1).gather(-1, targets[rows_i, cols_i].unsqueeze(-1)).squeeze(-1)
            return torch.zeros(len(rows), dtype=tok_lp.dtype, device=device).index_add(0, rows_i, tok_lp)
        logits = self.model(input_ids=input_ids, attention_mask=attn).logits[:, :-1].float()
        tok_lp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return (tok_lp * pred_mask).sum(dim=1)


# causal LMs whose logits are exactly lm_head(last hidden state) (no soft-capping or scaling)
_PLAIN_HEAD_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def _body_and_plain_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(transformer body, LM head) of a causal LM whose logits are ``head(body(...).last_hidden_state)``,
    else None. A peft model is unwrapped first: its ``base_model`` is peft's tuner, whose call returns
    logits, not hidden states, while the wrapped HF model carries the LoRA layers in place, so its body and
    head are the adapted ones and gradients reach the adapters through them."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(inner, "config", None)
    if getattr(cfg, "model_type", None) not in _PLAIN_HEAD_TYPES or not hasattr(inner, "get_output_embeddings"):
        return None
    return inner.base_model, inner.get_output_embeddings()
