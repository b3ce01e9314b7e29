"""Per-request logits processing inside a batched target forward, and the log-probabilities clients ask for.

One batch row holds one request; at a verification step row ``i`` has ``t`` positions (the last
committed token, then the drafts). Position ``j`` predicts the token after drafts ``1..j``, so a
frequency/presence penalty at ``j`` counts the request's output so far *plus* those drafts: the
processed distribution is exactly the one non-speculative decoding would use, and speculative
verification stays lossless. Penalties count generated tokens only (as vLLM and OpenAI do).
"""

from __future__ import annotations

import torch


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set logits outside the smallest nucleus with mass >= top_p to -inf (last dim; in place)."""
    srt, idx = torch.sort(logits, dim=-1, descending=True)
    p = torch.softmax(srt.double(), dim=-1)
    drop = (p.cumsum(-1) - p) >= top_p  # mass strictly before this token already reaches top_p
    drop[..., 0] = False
    logits.scatter_(-1, idx, srt.masked_fill(drop, float("-inf")))
    return logits


def bias_vector(items: tuple[tuple[int, float], ...], vocab: int, like: torch.Tensor) -> torch.Tensor | None:
    if not items:
        return None
    v = torch.zeros(vocab, dtype=like.dtype, device=like.device)
    for tok, b in items:
        v[tok] += b
    return v


def penalise(x: torch.Tensor, output: list[int], drafts: torch.Tensor | None, presence: float,
             frequency: float) -> None:
    """Subtract ``frequency * count + presence * [count > 0]`` from each position of ``x`` (t, V), in place."""
    t, vocab = x.shape
    counts = torch.bincount(torch.tensor(output, dtype=torch.long), minlength=vocab)[:vocab].to(x)
    counts = counts.expand(t, vocab).clone()
    if drafts is not None and t > 1:
        seen = torch.zeros(t, vocab, dtype=x.dtype, device=x.device)
        seen[torch.arange(1, t, device=x.device), drafts[1:t].to(x.device)] = 1.0
        counts += seen.cumsum(0)
    x -= frequency * counts + presence * (counts > 0).to(x)


def entries(lsm: torch.Tensor, tokens: list[int], k: int) -> list[tuple[int, float, list[tuple[int, float]]]]:
    """``(token, logprob, top-k [(token, logprob)])`` for each position of ``lsm`` (n, V) and its token."""
    if not tokens:
        return []
    lsm = lsm[: len(tokens)]
    chosen = lsm.gather(-1, torch.tensor(tokens, device=lsm.device)[:, None])[:, 0].tolist()
    tops: list[list[tuple[int, float]]] = [[] for _ in tokens]
    if k > 0:
        vals, idx = lsm.topk(k, dim=-1)
        tops = [list(zip(i, v, strict=True)) for i, v in zip(idx.tolist(), vals.tolist(), strict=True)]
    return [(t, c, top) for t, c, top in zip(tokens, chosen, tops, strict=True)]
