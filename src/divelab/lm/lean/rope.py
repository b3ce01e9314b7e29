"""Rotary position tables, computed once for every position the cache can hold.

HF recomputes cos/sin for the step's positions at every forward; a table indexed by position
turns that into a slice. Frequencies come from the HF model's own ``inv_freq`` buffer, so any
static rotary variant (default, linear, llama3) is reproduced without re-deriving it here.
"""

from __future__ import annotations

import torch


def rope_tables(inv_freq: torch.Tensor, max_len: int, scaling: float, dtype: torch.dtype
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)``, each (max_len, head_dim), for the half-split rotation HF Llama uses."""
    pos = torch.arange(max_len, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq.float()[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (heads, t, head_dim) by the tables' rows for its t positions (t, head_dim)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
