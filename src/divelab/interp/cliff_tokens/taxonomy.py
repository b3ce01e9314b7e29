"""The taxonomy of a cliff token, by its greedy rank and the entropy of the next-token distribution.

- **deterministic**: the greedy (rank-1) token at low entropy, a confident bias;
- **uncertain**: the greedy token at high entropy, a knowledge gap;
- **sampled-off**: a non-greedy token, bad luck in sampling.

The entropy is taken over the top-20 probabilities (as the authors' logprob API returned them); the boundary is
the binary entropy at 0.99, ``H_b(0.99) ~ 0.056`` nats: below it the model put about 99% on one token.

A consequence worth knowing (docs/systems/cliff-tokens.md): when the continuations are sampled from the same
distribution, ``P_{t-1} = sum_v pi(v) P(v)``, so a token with ``pi >= 0.99`` can lower the *true* potential by at
most 0.01. A deterministic cliff is then only possible through Monte Carlo noise or a decoding mismatch
(continuations sampled with a temperature / top-p the entropy does not see).
"""

from __future__ import annotations

import math

TYPES = ("deterministic", "uncertain", "sampled-off")


def binary_entropy(p: float) -> float:
    if not 0 < p < 1:
        return 0.0
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


ENTROPY_BOUNDARY = binary_entropy(0.99)  # ~0.056 nats


def classify(rank: int, entropy: float, boundary: float = ENTROPY_BOUNDARY) -> str:
    """``deterministic`` / ``uncertain`` / ``sampled-off`` for a token of greedy ``rank`` (1 = argmax)."""
    if rank < 1:
        raise ValueError(f"rank must be >= 1 (1 = the greedy token), got {rank}")
    if rank > 1:
        return "sampled-off"
    return "deterministic" if entropy < boundary else "uncertain"
