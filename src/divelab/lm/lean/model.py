"""The lean decoder: one sequence, a static cache, ``forward(tokens)`` appends and scores them.

A speculative verifier calls ``forward(draft)`` once for k draft tokens, reads their k logit rows,
then ``rollback(n)`` drops the rejected suffix. Plain decoding calls ``forward([token])``. Nothing
is allocated per step except the activations: no cache object, no mask object (a k-token step
builds one boolean causal mask; a 1-token step needs none).

``row_invariant=True`` makes a k-token forward give every row bit for bit the logits k one-token
forwards give: attention runs once per new token, exactly as a one-token step does, and the matrix
products are ones whose rows do not depend on how many rows come together (int8's kernel as it
is; in fp32 and bf16 oneDNN's pre-packed product, a one-token step multiplying two copies of its
row). A greedy speculative decoder verifying k drafts in one forward then commits the very
tokens plain one-token decoding by the same model would, in every format.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from divelab.lm.lean.arch import LeanConfig, check_model
from divelab.lm.lean.cache import StaticKVCache
from divelab.lm.lean.rope import apply_rope, rope_tables
from divelab.lm.lean.weights import LeanWeights, from_hf_weights

DEFAULT_MAX_LEN = 2048


class LeanLM:
    """A Llama-family HF model re-run by hand for fast single-sequence decoding on CPU.

    >>> from divelab.lm.lean import LeanLM                     # doctest: +SKIP
    >>> lean = LeanLM.from_hf(model, fmt="bf16")
    >>> logits = lean.forward([1, 2, 3])          # (3, vocab) float32; the cache now holds 3 tokens
    >>> lean.rollback(1)                          # forget the last one
    """

    def __init__(self, weights: LeanWeights, config: LeanConfig, *, max_len: int = DEFAULT_MAX_LEN,
                 eos_token_id: int | list[int] | None = None, compile: bool = False) -> None:
        self.w, self.config = weights, config
        self.row_invariant = weights.row_invariant
        self.fmt = weights.fmt
        self.eos_token_id = eos_token_id
        self.cache = StaticKVCache(config.n_layers, config.n_kv_heads, config.head_dim, max_len, weights.act_dtype)
        self.cos, self.sin = rope_tables(weights.inv_freq, max_len, weights.attention_scaling, weights.act_dtype)
        self.scale = config.head_dim ** -0.5
        if compile and self.row_invariant:
            # inductor fuses the elementwise work around the products into kernels of its own, whose rows are
            # not shown to be independent of how many rows come together: a speculative decoder's
            # losslessness would rest on an unchecked property
            raise ValueError("compile=True cannot be combined with row_invariant=True (a compiled forward's rows "
                             "are not checked to equal one-token forwards bit for bit); pick one")
        self._hidden = torch.compile(self._hidden_eager, dynamic=True) if compile else self._hidden_eager
        self.compiled = compile

    @classmethod
    def from_hf(cls, model: Any, fmt: str = "fp32", *, max_len: int = DEFAULT_MAX_LEN,
                compile: bool = False, row_invariant: bool = False) -> LeanLM:
        """Build from a loaded HF ``LlamaForCausalLM`` (ValueError for other architectures);
        ``row_invariant``: k-token forwards whose rows equal one-token forwards' bit for bit."""
        config = check_model(model)
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = getattr(model.config, "eos_token_id", None)
        return cls(from_hf_weights(model, config, fmt, row_invariant), config, max_len=max_len, eos_token_id=eos,
                   compile=compile)

    def fork(self, max_len: int | None = None) -> LeanLM:
        """Another sequence over the same weights (shared, not copied) with its own empty cache of
        ``max_len`` positions (default: this one's): one per request when serving several at once."""
        return LeanLM(self.w, self.config, max_len=max_len or self.cache.max_len, eos_token_id=self.eos_token_id,
                      compile=self.compiled)

    @property
    def length(self) -> int:
        """Tokens held in the cache."""
        return self.cache.length

    def reset(self) -> None:
        self.cache.length = 0

    def rollback(self, n: int) -> None:
        """Drop the last ``n`` tokens from the cache (their rows are overwritten by the next forward)."""
        self.cache.rollback(n)

    @torch.inference_mode()
    def forward(self, tokens: Sequence[int] | torch.Tensor, *, last_only: bool = False) -> torch.Tensor:
        """Append ``tokens`` to the sequence; return their next-token logits, (k, vocab) float32
        (``last_only``: (1, vocab) for the last token only, e.g. after a long prompt)."""
        return self.forward_hidden(tokens, (), last_only=last_only)[0]

    @torch.inference_mode()
    def forward_hidden(self, tokens: Sequence[int] | torch.Tensor, layers: Sequence[int], *,
                       last_only: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:meth:`forward`, also returning the hidden states of ``layers`` for every new token, each
        (k, hidden) in the activation dtype, indexed as HF's ``output_hidden_states`` tuple: 0 is the
        embeddings, i the output of layer i, and ``n_layers`` the final normed output (what a
        drafter reading the target's features needs)."""
        return forward_many([self], [tokens], layers, last_only=last_only)[0]

    __call__ = forward

    def _pad_single(self, k: int) -> bool:
        # oneDNN's fp32 and bf16 products take another kernel for a single row than for two or more, whose
        # rows agree bit for bit whatever their number: a row-invariant one-token step therefore multiplies
        # two copies of its row. (On an AMD Zen 4 the bf16 one-row kernel rounds the 1536-wide down
        # projection differently in about one row in ten; int8's kernel has no one-row path.)
        return self.row_invariant and k == 1 and self.fmt in ("fp32", "bf16")

    def _hidden_eager(self, ids: torch.Tensor, start: int, taps: tuple[int, ...] = ()
                      ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return _hidden_rows(ids, [(self, start, int(ids.shape[0]))], taps)


def _hidden_rows(ids: torch.Tensor, segments: list[tuple[LeanLM, int, int]], taps: tuple[int, ...]
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The layers over the new tokens of several sequences at once: ``ids`` holds each segment's ``k``
    tokens in turn, a segment ``(sequence, start, k)`` writing its own cache at ``start``. Every matrix
    product runs once over all rows (one read of the weights for every sequence); attention runs per
    segment over its own cache."""
    lead = segments[0][0]
    cfg, w = lead.config, lead.w
    rows = ids.shape[0]
    heads, kv_heads, hd, group = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.group
    q_dim, kv_dim = heads * hd, kv_heads * hd
    if len(segments) == 1:
        seq, start, k = segments[0]
        cos, sin = seq.cos[start:start + k], seq.sin[start:start + k]
    else:
        cos = torch.cat([seq.cos[start:start + k] for seq, start, k in segments])
        sin = torch.cat([seq.sin[start:start + k] for seq, start, k in segments])
    bounds = _row_bounds(segments)
    # built once per forward, not per layer: token i sees the cache and new tokens up to itself; rows (group, token)
    masks = [torch.arange(start + k)[None, :] <= (start + torch.arange(k)).repeat(group)[:, None]
             if k > 1 and not seq.row_invariant else None for seq, start, k in segments]
    lin = _two_rows if lead._pad_single(rows) else _as_is
    x = F.embedding(ids, w.embed)
    tapped = [x] if 0 in taps else []
    d = (cfg.hidden_size,)
    for li, lw in enumerate(w.layers):
        h = F.rms_norm(x, d, lw.attn_norm, cfg.rms_eps)
        qkv = lin(lw.qkv, h)
        # queries and keys rotate together: one rotary application per layer instead of two
        qk = apply_rope(qkv[:, :q_dim + kv_dim].view(rows, heads + kv_heads, hd).transpose(0, 1), cos, sin)
        v = qkv[:, q_dim + kv_dim:].view(rows, kv_heads, hd).transpose(0, 1)
        parts = []
        for (seq, start, k), (r0, r1), mask in zip(segments, bounds, masks, strict=True):
            q = qk[:heads, r0:r1]
            keys, values = seq.cache.write(li, start, qk[heads:, r0:r1], v[:, r0:r1])
            parts.append(_attend(seq, q, keys, values, start, k, mask))
        a = parts[0] if len(parts) == 1 else torch.cat(parts)
        x = x + lin(lw.o, a)
        h = F.rms_norm(x, d, lw.mlp_norm, cfg.rms_eps)
        gate, up = lin(lw.gate_up, h).chunk(2, dim=-1)
        x = x + lin(lw.down, F.silu(gate) * up)
        if li + 1 in taps:
            tapped.append(x)
    return x, tapped


def _row_bounds(segments: list[tuple[LeanLM, int, int]]) -> list[tuple[int, int]]:
    """Each segment's rows ``[r0, r1)`` in the flat batch of new tokens."""
    ends = list(itertools.accumulate(k for _, _, k in segments))
    return [(end - k, end) for (_, _, k), end in zip(segments, ends, strict=True)]


def _attend(seq: LeanLM, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, start: int, k: int,
            mask: torch.Tensor | None) -> torch.Tensor:
    """One sequence's attention output (k, q_dim) for its queries q (heads, k, hd) over its cache.
    Grouped-query attention without repeating keys: the ``group`` query heads that share a key/value
    head are stacked as extra query rows of that head."""
    cfg = seq.config
    kv_heads, group, hd = cfg.n_kv_heads, cfg.group, cfg.head_dim
    q_dim = cfg.n_heads * hd
    if seq.row_invariant and k > 1:  # each new token alone over the prefix it sees: the one-token step's very call
        return torch.cat([F.scaled_dot_product_attention(
            q[:, i].reshape(kv_heads, group, hd), keys[:, :start + i + 1], values[:, :start + i + 1],
            scale=seq.scale).reshape(1, q_dim) for i in range(k)])
    qg = q.reshape(kv_heads, group * k, hd)
    a = F.scaled_dot_product_attention(qg, keys, values, attn_mask=mask, scale=seq.scale)
    return a.view(cfg.n_heads, k, hd).transpose(0, 1).reshape(k, q_dim)


@torch.inference_mode()
def forward_many(seqs: Sequence[LeanLM], tokens: Sequence[Sequence[int] | torch.Tensor], layers: Sequence[int] = (),
                 *, last_only: bool = False) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    """:meth:`LeanLM.forward_hidden` for several sequences over the same weights in one forward: sequence
    i appends ``tokens[i]``; returns per sequence its (k_i, vocab) float32 logits and its ``layers``'
    hidden states. The matrix products run once over every sequence's rows (the weights are read once
    per step, not once per sequence), and with ``row_invariant`` sequences each row is bit for bit what
    that sequence's own forward gives, so serving requests together changes no token."""
    if len(seqs) == 0 or len(seqs) != len(tokens):
        raise ValueError(f"forward_many needs one token list per sequence, got {len(seqs)} sequences and "
                         f"{len(tokens)} token lists")
    lead = seqs[0]
    if any(s.w is not lead.w for s in seqs) or len({id(s) for s in seqs}) != len(seqs):
        raise ValueError("forward_many runs distinct sequences forked from one model (LeanLM.fork)")
    ids = [torch.as_tensor(t, dtype=torch.long).reshape(-1) for t in tokens]
    if any(int(t.numel()) == 0 for t in ids):
        raise ValueError("forward needs at least one token")
    n = lead.config.n_layers
    bad = [i for i in layers if not 0 <= i <= n]
    if bad:
        raise ValueError(f"hidden-state indices must be in 0..{n}, got {bad}")
    segments = [(s, s.cache.reserve(int(t.numel())), int(t.numel())) for s, t in zip(seqs, ids, strict=True)]
    taps = tuple(sorted({int(i) for i in layers if i < n}))
    flat = ids[0] if len(ids) == 1 else torch.cat(ids)
    x, tapped = lead._hidden(flat, segments[0][1], taps) if len(seqs) == 1 else _hidden_rows(flat, segments, taps)
    for s, start, k in segments:
        s.cache.length = start + k
    normed = F.rms_norm(x, (lead.config.hidden_size,), lead.w.norm, lead.config.rms_eps)
    found = dict(zip(taps, tapped, strict=True))
    found[n] = normed
    out, picks = [], _row_bounds(segments)
    heads_in = torch.cat([normed[r1 - 1:r1] for _, r1 in picks]) if last_only else normed
    lin = _two_rows if lead._pad_single(heads_in.shape[0]) else _as_is
    logits = lin(lead.w.lm_head, heads_in).float()
    for i, (r0, r1) in enumerate(picks):
        rows = logits[i:i + 1] if last_only else logits[r0:r1]
        out.append((rows, [found[int(j)][r0:r1] for j in layers]))
    return out


def _as_is(f, x: torch.Tensor) -> torch.Tensor:
    return f(x)


def _two_rows(f, x: torch.Tensor) -> torch.Tensor:
    return f(torch.cat([x, x]))[:1]
