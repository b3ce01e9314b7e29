"""Log-probability scoring for any HF causal LM, batched with padding masks.

- :func:`token_logprobs`: ``log p(x_t | x_<t)`` for every position of a padded batch.
- :func:`sequence_logprobs`: the same for a list of unpadded sequences.
- :func:`continuation_logprob`: sum or mean log-probability of a continuation given a prompt
  (the usual way to score answers, compare models, or compute policy log-likelihoods).

Batches are right-padded: with causal attention, padding after a sequence cannot change the
scores of its real tokens, so no position-id tricks are needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``out[b, t] = log p(input_ids[b, t+1] | input_ids[b, :t+1])``, shape ``[B, T-1]``.

    Positions whose target is padding (``attention_mask == 0``) are 0. Gradients flow (wrap in
    ``torch.no_grad()`` when scoring only). Batches must be right-padded.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be 2-D [batch, time], got shape {tuple(input_ids.shape)}")
    if input_ids.size(1) < 2:
        raise ValueError(f"need at least 2 tokens per row to score anything, got {input_ids.size(1)}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape "
                         f"{tuple(input_ids.shape)}")
    m = attention_mask.long()
    if bool((m[:, 1:] > m[:, :-1]).any()):
        raise ValueError("attention_mask must be right-padded (1s then 0s in every row)")
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return logp * m[:, 1:].to(logp.dtype)


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids, mask


def sequence_logprobs(model: torch.nn.Module, sequences: Sequence[Sequence[int]], *,
                      batch_size: int = 16) -> list[torch.Tensor]:
    """Per-token log-probs (length ``len(seq) - 1``) of each unpadded sequence, batched."""
    if any(len(s) < 2 for s in sequences):
        raise ValueError("every sequence needs at least 2 tokens to be scored")
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    for i in range(0, len(sequences), batch_size):
        chunk = sequences[i:i + batch_size]
        ids, mask = _pad(chunk, 0)
        lp = token_logprobs(model, ids.to(device), mask.to(device)).cpu()
        out.extend(lp[j, :len(s) - 1] for j, s in enumerate(chunk))
    return out


def continuation_logprob(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                         continuations: Sequence[Sequence[int]], *, reduce: str = "sum",
                         batch_size: int = 16) -> torch.Tensor | list[torch.Tensor]:
    """``log p(continuation | prompt)`` per pair: summed over the continuation's tokens
    (``reduce="sum"``), averaged (``"mean"``), or per token (``"none"``: a list of tensors).

    Prompts need >= 1 token (start with bos/eos when there is no natural prompt) and
    continuations >= 1 token.
    """
    if reduce not in ("sum", "mean", "none"):
        raise ValueError(f"reduce must be 'sum', 'mean' or 'none', got {reduce!r}")
    if len(prompts) != len(continuations):
        raise ValueError(f"got {len(prompts)} prompts but {len(continuations)} continuations; they pair up 1:1")
    for i, (p, c) in enumerate(zip(prompts, continuations, strict=True)):
        if len(p) < 1 or len(c) < 1:
            raise ValueError(f"pair {i}: prompt ({len(p)} tokens) and continuation ({len(c)} tokens) "
                             "both need at least one token")
    full = [list(p) + list(c) for p, c in zip(prompts, continuations, strict=True)]
    per_tok = sequence_logprobs(model, full, batch_size=batch_size)
    conts = [lp[len(p) - 1:] for lp, p in zip(per_tok, prompts, strict=True)]
    if reduce == "none":
        return conts
    return torch.stack([c.sum() if reduce == "sum" else c.mean() for c in conts])


def text_logprob(model: torch.nn.Module, tokenizer, prompt: str, continuation: str, *,
                 reduce: str = "sum") -> float:
    """``log p(continuation | prompt)`` for strings (tokenized separately, then joined)."""
    p = tokenizer.encode(prompt, add_special_tokens=False)
    if not p:
        p = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    c = tokenizer.encode(continuation, add_special_tokens=False)
    with torch.no_grad():
        return float(continuation_logprob(model, [p], [c], reduce=reduce)[0])
