"""Seeded sampling for any HF causal LM: temperature, top-p, top-k, greedy, eos stop, KV cache.

Randomness comes only from a ``torch.Generator`` seeded by ``seed``, so the same call gives the
same tokens. Batched prompts of different lengths are left-padded, with position ids computed
from the attention mask so padding does not shift positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class Generation:
    """New tokens per prompt (prompt excluded; stopped at and including eos when hit)."""

    tokens: list[list[int]]
    logprobs: list[list[float]]  # log p(token) under the model's untempered distribution
    finished: list[bool]  # True where eos was generated

    def texts(self, tokenizer, skip_special_tokens: bool = True) -> list[str]:
        return [tokenizer.decode(t, skip_special_tokens=skip_special_tokens) for t in self.tokens]


def _check(temperature: float, top_p: float, top_k: int | None, max_new_tokens: int) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")


def filter_logits(logits: torch.Tensor, top_p: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """Set logits outside the top-k / nucleus (smallest set with mass >= top_p) to -inf.

    The most likely token is always kept, so the result is never empty.
    """
    logits = logits.clone()
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits[logits < kth] = float("-inf")
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass *before* it already reaches top_p
        drop_sorted = (probs.cumsum(-1) - probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits[drop] = float("-inf")
    return logits


def _as_batch(prompts: Sequence[Sequence[int]] | torch.Tensor) -> list[list[int]]:
    if isinstance(prompts, torch.Tensor):
        if prompts.ndim == 1:
            prompts = prompts[None]
        if prompts.ndim != 2:
            raise ValueError(f"prompt tensor must be 1-D or 2-D, got shape {tuple(prompts.shape)}")
        return [list(map(int, row)) for row in prompts.tolist()]
    if len(prompts) and isinstance(prompts[0], int):
        return [list(map(int, prompts))]  # type: ignore[arg-type]
    return [list(map(int, p)) for p in prompts]


@torch.no_grad()
def generate(model: torch.nn.Module, prompts: Sequence[Sequence[int]] | Sequence[int] | torch.Tensor, *,
             max_new_tokens: int = 64, temperature: float = 1.0, top_p: float = 1.0, top_k: int | None = None,
             greedy: bool = False, eos_token_id: int | None = None, pad_token_id: int | None = None,
             seed: int = 0) -> Generation:
    """Sample continuations of one prompt (a list of ids) or a batch of prompts.

    ``greedy=True`` or ``temperature=0`` takes the argmax. ``eos_token_id`` defaults to the
    model config's. Each prompt needs at least one token.
    """
    _check(temperature, top_p, top_k, max_new_tokens)
    batch = _as_batch(prompts)
    if not batch or any(len(p) == 0 for p in batch):
        raise ValueError("every prompt needs at least one token (e.g. start with the tokenizer's bos or eos)")
    cfg = getattr(model, "config", None)
    if eos_token_id is None:
        eos_token_id = getattr(cfg, "eos_token_id", None)
        if isinstance(eos_token_id, list):
            eos_token_id = eos_token_id[0] if eos_token_id else None
    if pad_token_id is None:
        pad_token_id = getattr(cfg, "pad_token_id", None)
        pad_token_id = eos_token_id if pad_token_id is None else pad_token_id
        pad_token_id = 0 if pad_token_id is None else pad_token_id
    greedy = greedy or temperature == 0
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device

    n, width = len(batch), max(len(p) for p in batch)
    ids = torch.full((n, width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(batch):  # left padding: every row's last token sits at the same column
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)

    was_training = model.training
    model.eval()
    out_tokens: list[list[int]] = [[] for _ in range(n)]
    out_logprobs: list[list[float]] = [[] for _ in range(n)]
    finished = [False] * n
    past = None
    step_ids = ids
    try:
        for _ in range(max_new_tokens):
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=step_ids, attention_mask=mask, position_ids=positions[:, -step_ids.size(1):],
                        cache=past, use_cache=True)
            past = out.cache
            logits = out.logits[:, -1, :].float().cpu()
            logp = torch.log_softmax(logits, dim=-1)
            if greedy:
                nxt = logits.argmax(-1)
            else:
                probs = torch.softmax(filter_logits(logits / temperature, top_p, top_k), dim=-1)
                nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
            for i in range(n):
                if finished[i]:
                    continue
                tok = int(nxt[i])
                out_tokens[i].append(tok)
                out_logprobs[i].append(float(logp[i, tok]))
                if eos_token_id is not None and tok == eos_token_id:
                    finished[i] = True
            if all(finished):
                break
            # finished rows keep decoding (cheaper than re-shaping the cache); their outputs are ignored
            step_ids = nxt[:, None].to(device)
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=-1)
    finally:
        model.train(was_training)
    return Generation(out_tokens, out_logprobs, finished)


def sample_text(model: torch.nn.Module, tokenizer, prompt: str, *, max_new_tokens: int = 64,
                temperature: float = 1.0, top_p: float = 1.0, top_k: int | None = None, greedy: bool = False,
                seed: int = 0, skip_special_tokens: bool = True) -> str:
    """Sample one continuation of ``prompt`` and return it as text (prompt excluded)."""
    ids = tokenizer.encode(prompt, add_special_tokens=False)
    if not ids:
        ids = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    g = generate(model, [ids], max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                 greedy=greedy, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, seed=seed)
    return g.texts(tokenizer, skip_special_tokens=skip_special_tokens)[0]
