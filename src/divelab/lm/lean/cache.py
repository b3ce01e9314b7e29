"""A static key/value cache for one sequence: allocated once, written in place, rolled back by
moving one integer.

HF's dynamic cache grows by concatenation and rebuilds mask objects every step; here every layer's
keys and values live in one pre-allocated tensor per kind, a step writes its ``k`` new rows at
``length`` and attention reads the prefix ``[:length]``. Rows past ``length`` are stale but never
read, so rolling back ``n`` tokens (rejected draft tokens) is ``length -= n``: no copy, no free.
"""

from __future__ import annotations

import torch


class StaticKVCache:
    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, max_len: int, dtype: torch.dtype) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        shape = (n_layers, n_kv_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)
        self.max_len = max_len
        self.length = 0

    def reserve(self, k: int) -> int:
        """Check ``k`` more tokens fit; return the position of the first."""
        if self.length + k > self.max_len:
            raise ValueError(f"the cache holds {self.max_len} tokens and has {self.length}; {k} more do not fit "
                             f"(build the lean model with a larger max_len)")
        return self.length

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``/``v`` (kv_heads, t, head_dim) at ``start``; return the layer's keys/values up to them."""
        end = start + k.shape[1]
        self.keys[layer, :, start:end] = k
        self.values[layer, :, start:end] = v
        return self.keys[layer, :, :end], self.values[layer, :, :end]

    def rollback(self, n: int) -> None:
        """Forget the last ``n`` tokens."""
        if not 0 <= n <= self.length:
            raise ValueError(f"cannot roll back {n} tokens: the cache holds {self.length}")
        self.length -= n
