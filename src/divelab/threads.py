"""Pinning torch's intra-op thread count around a block of work.

Tiny models on this shared 2-core machine run many times faster single-threaded (no
oversubscription). It also matters for reproducibility: float reductions split across a
different number of threads round differently, and an RL run amplifies those last bits into
different results. Anything that is cached and shared (a warm start, a trained model) is
therefore built under a fixed thread count, whatever the caller had set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads, then restore the caller's setting."""
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
