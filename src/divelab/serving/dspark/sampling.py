"""Lossless speculative sampling for one request (Leviathan et al. / Chen et al.; DSpark §2.1).

Draft token x_k (sampled from p_d) is accepted with probability min(1, p_t(x_k)/p_d(x_k)); at the
first rejection a token is resampled from the residual normalise(max(0, p_t − p_d)) and the rest
of the block is discarded; if every sent draft is accepted a bonus token is sampled from the
target at the next position. Greedy mode (temperature 0) accepts while the draft equals the
target's argmax and appends the target's argmax: output identical to plain greedy decoding.
"""

from __future__ import annotations

import torch


def probs_at(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Softmax at a temperature, computed in float64 so ratios stay exact enough."""
    return torch.softmax(logits.double() / temperature, dim=-1)


def verify_block(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, target_logits: torch.Tensor,
                 temperature: float, generator: torch.Generator | None = None) -> tuple[int, int]:
    """Verify ``ℓ = len(draft_tokens)`` drafts against ``target_logits`` (ℓ+1 rows: row k scores
    the token after the anchor and drafts < k). Returns (number accepted, next token)."""
    n = int(draft_tokens.shape[0])
    if temperature <= 0:
        tgt = target_logits.argmax(dim=-1)
        acc = 0
        while acc < n and int(draft_tokens[acc]) == int(tgt[acc]):
            acc += 1
        return acc, int(tgt[acc])
    p_t = probs_at(target_logits, temperature)
    if n:
        if draft_probs is None:
            raise ValueError("sampling verification needs the draft distributions")
        idx = draft_tokens.long()
        rows = torch.arange(n)
        pt_x = p_t[rows, idx]
        pd_x = draft_probs[rows, idx].double()
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        ok = u * pd_x < pt_x  # u < p_t/p_d without dividing by a possibly tiny p_d
        rejected = torch.nonzero(~ok)
        if len(rejected):
            k = int(rejected[0])
            res = torch.clamp(p_t[k] - draft_probs[k].double(), min=0.0)
            if float(res.sum()) <= 0.0:  # numerically p_t == p_d here; resample from p_t
                res = p_t[k]
            tok = int(torch.multinomial(res / res.sum(), 1, generator=generator))
            return k, tok
    return n, int(torch.multinomial(p_t[n], 1, generator=generator))


def verify_batch(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, target_logits: torch.Tensor,
                 ell: torch.Tensor, temperature: float, generator: torch.Generator | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Vectorised :func:`verify_block` for R requests at once, on the tensors' device.

    ``draft_tokens`` (R, T−1), ``draft_probs`` (R, T−1, V) or None when greedy, ``target_logits``
    (R, T, V), ``ell`` (R,) drafts actually sent per row (≤ T−1; slots beyond are ignored).
    Returns (accepted (R,), next token (R,)) as device tensors: the same rule as ``verify_block``
    (accept x_k with prob min(1, p_t/p_d), resample the first rejection from the residual, else a
    bonus token from p_t), with the uniforms of all rows drawn in one call."""
    r, t = target_logits.shape[0], target_logits.shape[1]
    dev = target_logits.device
    rows = torch.arange(r, device=dev)
    live = torch.arange(t - 1, device=dev)[None] < ell[:, None]
    if temperature <= 0:
        tgt = target_logits.argmax(dim=-1)
        ok = (draft_tokens == tgt[:, : t - 1]) & live
        acc = ok.long().cumprod(1).sum(1)
        return acc, tgt[rows, acc]
    p_t = probs_at(target_logits, temperature)
    if t > 1:
        if draft_probs is None:
            raise ValueError("sampling verification needs the draft distributions")
        idx = draft_tokens.long()[..., None]
        pt_x = p_t[:, : t - 1].gather(-1, idx).squeeze(-1)
        pd = draft_probs.double()
        pd_x = pd.gather(-1, idx).squeeze(-1)
        u = torch.rand(r, t - 1, generator=generator, device=dev, dtype=torch.float64)
        ok = (u * pd_x < pt_x) & live  # u < p_t/p_d without dividing by a possibly tiny p_d
        acc = ok.long().cumprod(1).sum(1)
    else:
        acc = torch.zeros(r, dtype=torch.long, device=dev)
    ptk = p_t[rows, acc]
    dist = ptk
    if t > 1:
        rejected = (acc < ell)[:, None]
        res = torch.clamp(ptk - pd[rows, acc.clamp(max=t - 2)], min=0.0)
        res = torch.where(res.sum(-1, keepdim=True) > 0, res, ptk)  # numerically p_t == p_d: resample from p_t
        dist = torch.where(rejected, res, ptk)
    nxt = torch.multinomial(dist / dist.sum(-1, keepdim=True), 1, generator=generator).squeeze(-1)
    return acc, nxt
